//! Every difference between format versions 0–4, in one table. Checks ask the dialect; they
//! never compare version numbers themselves.

use super::codes::{Code, Severity, SeverityRule};

/// The event types that can join the surface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SurfaceKind {
    User,
    Assistant,
    ToolResult,
    System,
    Developer,
}

impl SurfaceKind {
    pub fn from_type(t: &str) -> Option<SurfaceKind> {
        Some(match t {
            "user/message" => SurfaceKind::User,
            "assistant/message" => SurfaceKind::Assistant,
            "tool/result" => SurfaceKind::ToolResult,
            "system/message" => SurfaceKind::System,
            "developer/message" => SurfaceKind::Developer,
            _ => return None,
        })
    }

    pub fn type_name(self) -> &'static str {
        match self {
            SurfaceKind::User => "user/message",
            SurfaceKind::Assistant => "assistant/message",
            SurfaceKind::ToolResult => "tool/result",
            SurfaceKind::System => "system/message",
            SurfaceKind::Developer => "developer/message",
        }
    }
}

/// How a tool result message is shaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolResultShape {
    /// v0–v3: role `user`, content = exactly one `tool-result` block.
    Wrapped,
    /// v4: role `tool`, `toolCallId` on the message, content = the result blocks.
    ToolRole,
}

/// The `source` of a compaction checkpoint message (§15.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckpointSource {
    /// v0–v3: `{"kind":"plugin","plugin":"compact","compactionId":C}`.
    Plugin,
    /// v4: `{"kind":"compact-checkpoint","compactionId":C}`.
    CompactCheckpoint,
}

/// Which header field says the session is seeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeedField {
    /// v0/v1: `seedLength?` (the inherited event count).
    Length,
    /// v2+: `isSeeded` (required) plus an inherited `session/end-seed` marker.
    Flag,
}

#[derive(Debug)]
pub struct Dialect {
    pub version: u8,
    /// v0/v1 store runs of chunk deltas as packed rows.
    pub packed_rows: bool,
    pub seed_field: SeedField,
    /// Header keys outside the version's set: v0 ignores them (warning), v1+ refuse.
    pub strict_header: bool,
    pub surface_types: &'static [SurfaceKind],
    /// Replace endpoint keys: (`start`,`end`) or (`startSeq`,`endSeq`).
    pub replace_keys: (&'static str, &'static str),
    /// The V3 canonical envelope (§8): event-local violations are bad rows, endpoints must be
    /// earlier, provenance runs before the range lookup, `-0` refused in surface seqs.
    pub canonical: bool,
    /// v3+: unknown ignorable events are opaque even with surface metadata.
    pub opaque_unknown_metadata: bool,
    /// v0–v2 allow an empty `sourceEventSeqs` on `assistant/message`; v3+ forbid the field there.
    pub assistant_empty_provenance: bool,
    /// v3+: a system/message at position 0 is protected.
    pub system_head: bool,
    /// v4: developer messages, developer binding, message projections.
    pub developer: bool,
    pub tool_result_shape: ToolResultShape,
    /// v2+: assistant stream embedded in `assistant/message` and `assistant/attempt`.
    pub embedded_stream: bool,
    /// v0: the reader normalizes pre-release shapes and refuses retired legacy events.
    pub legacy_v0: bool,
    /// v3+: lifecycle restore rules (§13.2) instead of the v0 companion rules (§13.1).
    pub restore_lifecycle: bool,
    pub lifecycle_severity: Severity,
    /// v4: source kind `plugin` retired, `tool-result` block retired.
    pub v4_payloads: bool,
    /// v4: pre-release V3 shapes mark the log as an unreleased draft (§21.2).
    pub draft_signals: bool,
    /// How a compaction checkpoint message names its source (§15.1).
    pub checkpoint_source: CheckpointSource,
    /// v4: message-projection events (`image/offload`) rewrite derived messages (§12.2).
    pub message_projections: bool,
    /// v4: message admission (identity, role, source, content array; §9.2) is part of the
    /// fold (`validateSessionEventData` in `surface.ts`), so a message that fails it is
    /// rejected from the surface. In v0–v3 the shape check is separate from the fold.
    pub admission_in_fold: bool,
    /// Types added to the 48 common ones.
    pub extra_types: &'static [&'static str],
    /// A row typed like a packed row is one only with `seq0` (a SQLite store's stream,
    /// [`Dialect::for_store`]); in a JSONL log the type alone decides (§5.2).
    pub packed_by_seq0: bool,
    /// Types this version refuses when required (non-ignorable).
    pub retired_types: &'static [&'static str],
    /// `request/header.data.reason` values.
    pub header_reasons: &'static [&'static str],
}

/// The 48 types every version knows (§7.2).
pub const COMMON_TYPES: &[&str] = &[
    "agent-preset/selected",
    "agent/inbox/spliced",
    "approval/asked",
    "approval/decided",
    "approval/policy",
    "assistant/message",
    "command/done",
    "command/run",
    "compaction/end",
    "compaction/prune",
    "compaction/start",
    "compaction/summary",
    "feedback/record",
    "goal/change",
    "hook/invoked",
    "hook/result",
    "llm/retry",
    "llm/retry-started",
    "model/selection",
    "permission/preset",
    "plan/mode",
    "request/context",
    "request/header",
    "sandbox/mode",
    "schedule/change",
    "session-log-deepseek/delivery-accepted",
    "session/end-seed",
    "session/title",
    "session/title-llm-request",
    "step/end",
    "step/start",
    "subagent/descriptor",
    "subagent/model-selection-policy",
    "team/member",
    "team/message/delivered",
    "team/message/queued",
    "team/task",
    "todo/write",
    "tool-workflow/agent-end",
    "tool-workflow/agent-start",
    "tool-workflow/run-end",
    "tool-workflow/run-start",
    "tool/call",
    "tool/result",
    "turn/end",
    "turn/start",
    "user/message",
    "web/deepseek-search-llm-request",
];

const V0_EXTRA: &[&str] = &[
    "assistant/chunk",
    "tool/code-dispatch",
    "tool/code-dispatch-start",
];
const V2_EXTRA: &[&str] = &[
    "tool/code-dispatch",
    "tool/code-dispatch-start",
    "assistant/attempt",
    "feedback/message-put",
    "feedback/message-delete",
];
/// v4 adds its last two types to v3's, so v3's list is the rest of it.
const V3_EXTRA: &[&str] = V4_EXTRA.split_at(V4_EXTRA.len() - 2).0;
const V4_EXTRA: &[&str] = &[
    "assistant/attempt",
    "feedback/message-put",
    "feedback/message-delete",
    "system/message",
    "tool/ptc-dispatch",
    "tool/ptc-dispatch-start",
    "deliverables/presented",
    "image/offload",
    "subagent/catalog",
    "developer/message",
    "workspace/changes",
];
const RETIRED_V3: &[&str] = &["tool/code-dispatch", "tool/code-dispatch-start"];

const THREE: &[SurfaceKind] = &[
    SurfaceKind::User,
    SurfaceKind::Assistant,
    SurfaceKind::ToolResult,
];
const FOUR: &[SurfaceKind] = &[
    SurfaceKind::User,
    SurfaceKind::Assistant,
    SurfaceKind::ToolResult,
    SurfaceKind::System,
];
const FIVE: &[SurfaceKind] = &[
    SurfaceKind::User,
    SurfaceKind::Assistant,
    SurfaceKind::ToolResult,
    SurfaceKind::System,
    SurfaceKind::Developer,
];
const REASONS_V0: &[&str] = &["initial", "resume", "change"];
const REASONS_V2: &[&str] = &["initial", "resume", "change", "series"];

const fn legacy(version: u8) -> Dialect {
    Dialect {
        version,
        packed_rows: version <= 1,
        seed_field: if version <= 1 {
            SeedField::Length
        } else {
            SeedField::Flag
        },
        strict_header: version >= 1,
        surface_types: THREE,
        replace_keys: ("start", "end"),
        canonical: false,
        opaque_unknown_metadata: false,
        assistant_empty_provenance: true,
        system_head: false,
        developer: false,
        tool_result_shape: ToolResultShape::Wrapped,
        embedded_stream: version >= 2,
        legacy_v0: version == 0,
        restore_lifecycle: false,
        lifecycle_severity: Severity::Warning,
        v4_payloads: false,
        draft_signals: false,
        checkpoint_source: CheckpointSource::Plugin,
        message_projections: false,
        admission_in_fold: false,
        extra_types: if version <= 1 { V0_EXTRA } else { V2_EXTRA },
        packed_by_seq0: false,
        retired_types: &[],
        header_reasons: if version <= 1 { REASONS_V0 } else { REASONS_V2 },
    }
}

const fn canonical(version: u8) -> Dialect {
    Dialect {
        version,
        packed_rows: false,
        seed_field: SeedField::Flag,
        strict_header: true,
        surface_types: if version == 3 { FOUR } else { FIVE },
        replace_keys: ("startSeq", "endSeq"),
        canonical: true,
        opaque_unknown_metadata: true,
        assistant_empty_provenance: false,
        system_head: true,
        developer: version >= 4,
        tool_result_shape: if version == 3 {
            ToolResultShape::Wrapped
        } else {
            ToolResultShape::ToolRole
        },
        embedded_stream: true,
        legacy_v0: false,
        restore_lifecycle: true,
        lifecycle_severity: Severity::Error,
        v4_payloads: version >= 4,
        draft_signals: version == 4,
        checkpoint_source: if version == 3 {
            CheckpointSource::Plugin
        } else {
            CheckpointSource::CompactCheckpoint
        },
        message_projections: version >= 4,
        admission_in_fold: version >= 4,
        extra_types: if version == 3 { V3_EXTRA } else { V4_EXTRA },
        packed_by_seq0: false,
        retired_types: RETIRED_V3,
        header_reasons: REASONS_V2,
    }
}

pub static DIALECTS: [Dialect; 5] = [legacy(0), legacy(1), legacy(2), canonical(3), canonical(4)];

/// The dialects of a session streamed from a SQLite store ([`Dialect::for_store`]).
static STORE_DIALECTS: [Dialect; 5] = [
    from_store(legacy(0)),
    from_store(legacy(1)),
    from_store(legacy(2)),
    from_store(canonical(3)),
    from_store(canonical(4)),
];

const fn from_store(d: Dialect) -> Dialect {
    Dialect {
        packed_by_seq0: true,
        ..d
    }
}

impl Dialect {
    /// This version as a SQLite store's stream has it: a row typed like a packed row is one
    /// only with `seq0` (the storage layer's discriminator, SQLITE.md S4.3); otherwise it is
    /// an ordinary event of that type.
    pub fn for_store(&self) -> &'static Dialect {
        &STORE_DIALECTS[self.version as usize]
    }

    pub fn for_version(version: u8) -> Option<&'static Dialect> {
        DIALECTS.get(version as usize)
    }

    /// The severity of `code` in a log of this version.
    pub fn severity(&self, code: Code) -> Severity {
        match code.info().severity {
            SeverityRule::WarningInV0 if !self.strict_header => Severity::Warning,
            SeverityRule::Lifecycle => self.lifecycle_severity,
            _ => code.severity(),
        }
    }

    pub fn surface_kind(&self, event_type: &str) -> Option<SurfaceKind> {
        SurfaceKind::from_type(event_type).filter(|k| self.surface_types.contains(k))
    }

    /// Built-in vocabulary of this version (retired types included: they are known, refused).
    pub fn knows(&self, event_type: &str) -> bool {
        COMMON_TYPES.contains(&event_type) || self.extra_types.contains(&event_type)
    }

    pub fn is_retired(&self, event_type: &str) -> bool {
        self.retired_types.contains(&event_type)
    }

    /// The role a message of this surface kind must have.
    pub fn role_of(&self, kind: SurfaceKind) -> &'static str {
        match kind {
            SurfaceKind::User => "user",
            SurfaceKind::Assistant => "assistant",
            SurfaceKind::System => "system",
            SurfaceKind::Developer => "developer",
            SurfaceKind::ToolResult => match self.tool_result_shape {
                ToolResultShape::Wrapped => "user",
                ToolResultShape::ToolRole => "tool",
            },
        }
    }

    pub fn total_types(&self) -> usize {
        COMMON_TYPES.len() + self.extra_types.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vocabulary_totals_match_the_spec() {
        let totals: Vec<usize> = DIALECTS.iter().map(Dialect::total_types).collect();
        assert_eq!(totals, vec![51, 51, 53, 57, 59]);
    }

    #[test]
    fn lifecycle_severity_depends_on_version() {
        let severity = |v: usize, code: Code| DIALECTS[v].severity(code);
        assert_eq!(severity(0, Code::TurnEndMismatch), Severity::Warning);
        assert_eq!(severity(2, Code::TurnEndMismatch), Severity::Warning);
        assert_eq!(severity(3, Code::TurnEndMismatch), Severity::Error);
        assert_eq!(severity(0, Code::HeaderUnexpectedField), Severity::Warning);
        assert_eq!(severity(1, Code::HeaderUnexpectedField), Severity::Error);
    }

    #[test]
    fn surface_types_grow_per_version() {
        assert_eq!(DIALECTS[2].surface_kind("system/message"), None);
        assert_eq!(
            DIALECTS[3].surface_kind("system/message"),
            Some(SurfaceKind::System)
        );
        assert_eq!(DIALECTS[3].surface_kind("developer/message"), None);
        assert_eq!(
            DIALECTS[4].surface_kind("developer/message"),
            Some(SurfaceKind::Developer)
        );
    }
}
