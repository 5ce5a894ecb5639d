//! The finding catalogue: every stable code, once, with its severity rule, the rule it
//! enforces (FORMAT.md section), what it means and how to fix it. `dshs explain` prints
//! this table; the checks refer to codes only through [`Code`].

use std::fmt;

/// How severe a finding of this code is, given the log's format version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeverityRule {
    Error,
    Warning,
    /// Counts as an error but makes the log *unsupported* (exit 3), not corrupt.
    Unsupported,
    /// Warning in v0 (DSH v0 accepts unknown header keys), error from v1 on.
    WarningInV0,
    /// Warning in v0–v2 (DSH loads such logs), error in v3+ (restore refuses them).
    Lifecycle,
}

/// Which stage owns the rule. Findings of the stages that stop DSH from folding the log
/// (`blocks_fold`) make `surface`/`derive` refuse; lifecycle and payload findings do not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Area {
    File,
    Zstd,
    Version,
    Header,
    Rows,
    Vocabulary,
    Messages,
    RequestHeader,
    Developer,
    Fold,
    Lifecycle,
    Compaction,
    /// The SQLite session store's container (SQLITE.md): identity, session rows, event rows.
    Sqlite,
}

impl Area {
    pub fn name(self) -> &'static str {
        match self {
            Area::File => "file and lines",
            Area::Zstd => "zstd framing",
            Area::Version => "format version",
            Area::Header => "header",
            Area::Rows => "rows and envelope",
            Area::Vocabulary => "event vocabulary",
            Area::Messages => "messages",
            Area::RequestHeader => "request header",
            Area::Developer => "developer messages (v4)",
            Area::Fold => "surface fold",
            Area::Lifecycle => "lifecycle",
            Area::Compaction => "compaction",
            Area::Sqlite => "SQLite storage",
        }
    }
}

pub struct CodeInfo {
    pub code: Code,
    pub name: &'static str,
    pub severity: SeverityRule,
    pub area: Area,
    /// Whether an error of this code means DSH cannot fold the log (surface/derive refuse).
    pub blocks_fold: bool,
    pub section: &'static str,
    pub meaning: &'static str,
    pub fix: &'static str,
}

macro_rules! catalogue {
    ($( $variant:ident = $name:literal, $sev:ident, $area:ident, $blocks:literal, $section:literal,
        $meaning:literal, $fix:literal; )*) => {
        /// A stable finding code. Its kebab-case spelling is part of the CLI contract.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Code { $($variant),* }

        pub static CATALOGUE: &[CodeInfo] = &[
            $(CodeInfo {
                code: Code::$variant,
                name: $name,
                severity: SeverityRule::$sev,
                area: Area::$area,
                blocks_fold: $blocks,
                section: $section,
                meaning: $meaning,
                fix: $fix,
            }),*
        ];
    };
}

catalogue! {
    FileNoHeader = "file-no-header", Error, File, true, "§3.1",
        "The file has no complete first line, so there is no session header (DSH: `empty or header-less session log`).",
        "The log is empty or was cut before its first newline. Restore it from a backup; there is nothing to repair.";
    InvalidUtf8 = "invalid-utf8", Warning, File, false, "§3.2",
        "A line holds bytes that are not UTF-8. DSH decodes lossily (U+FFFD), so the line still loads.",
        "Usually harmless; find the writer that emitted raw bytes. `derive` passes the original bytes through.";
    DuplicateJsonKey = "duplicate-json-key", Warning, File, false, "§3.2",
        "An object repeats a member name; JavaScript keeps the last value, other readers may not.",
        "Remove the earlier duplicate if the log is hand-edited; DSH never writes duplicates.";
    JsonNotLossless = "json-not-lossless", Error, File, true, "§3.2",
        "An event contains `-0` (JavaScript's negative zero) or a number beyond the double range (read as Infinity); DSH's lossless-JSON check refuses both.",
        "Replace `-0` with `0` and out-of-range numbers with what was meant (DSH never writes either).";
    TornLine = "torn-line", Warning, File, false, "§3.1, §6",
        "The file ends in a line without a newline: a write cut by a crash. It is never parsed and never counts.",
        "Run `dshs repair` to cut it off (its bytes are kept in a sidecar).";
    CrashTail = "crash-tail", Warning, File, false, "§6.2",
        "Complete but unusable lines after the last committed turn end: DSH drops them silently on load.",
        "Run `dshs repair` to cut them off (their bytes are kept in a sidecar).";
    CommittedUnparsable = "committed-unparsable", Error, File, true, "§6.2",
        "A line that is not valid JSON lies before a later `turn/end`, i.e. inside the committed region. DSH refuses the log.",
        "This is corruption, not crash damage: restore the log from a backup or fix the line by hand.";
    CommittedNotEvent = "committed-not-event", Error, File, true, "§3.2, §6.2",
        "A committed line is valid JSON but not an object, so it cannot be an event.",
        "Corruption inside the committed region: restore the log or fix the line by hand.";
    CommittedMalformedRow = "committed-malformed-row", Error, File, true, "§5.2, §5.3, §6.2",
        "A committed row fails storage decoding (packed chunk row or range-encoded `sourceEventSeqs`).",
        "Corruption inside the committed region: restore the log or fix the row by hand.";
    CommittedSeqGap = "committed-seq-gap", Error, File, true, "§6.2",
        "A committed event's `seq` is not the next expected one (seqs are dense from 0).",
        "Corruption inside the committed region (lost or duplicated lines): restore the log.";
    GenerationNameMismatch = "generation-name-mismatch", Warning, File, false, "§2.2",
        "The canonical generation file name (`session.jsonl` = v0, `session.vN.jsonl` = vN) disagrees with the header version.",
        "Rename the file to match its header, or check that the right generation was copied.";
    HeaderIdPathMismatch = "header-id-path-mismatch", Warning, File, false, "§2.1",
        "The file sits in a DSH session directory whose name does not encode the header `id` (or `cwd`). DSH opens such a session only by path.",
        "Move the log to the directory DSH derives from its id and cwd, or ignore this for a copied file.";
    FileNotRegular = "file-not-regular", Error, File, true, "§2.1",
        "A session directory's newest generation file is not a regular file (a FIFO, socket or device). DSH writes its logs as regular files; dshs did not open it, because opening a FIFO waits until a writer appears.",
        "Replace it with the real log file, or, to read what a FIFO delivers, name the FIFO itself on the command line (it is then read once, like standard input).";
    ZstdBadMagic = "zstd-bad-magic", Error, Zstd, true, "§3.3",
        "A zstd frame does not start with the magic `28 B5 2F FD` (skippable frames are not supported).",
        "The compressed log is corrupt at that offset; restore it from a backup.";
    ZstdFrameInvalid = "zstd-frame-invalid", Error, Zstd, true, "§3.3",
        "A complete zstd frame fails to decode (reserved bits or block type, bad checksum, decoder error).",
        "The compressed log is corrupt; restore it from a backup.";
    ZstdCommittedDamage = "zstd-committed-damage", Error, Zstd, true, "§3.3, §6",
        "A zstd frame seems to run past the end of the file, yet a complete frame that decodes (and passes its checksum) starts inside it: a damaged block header, not a frame torn by a crash. The frames after it are committed data, so this is corruption, not a torn tail.",
        "Restore the log from a backup. `repair` and `compact` refuse it: cutting the \"torn\" frame would throw away the committed frames after it.";
    ZstdHeaderFrame = "zstd-header-frame", Error, Zstd, true, "§3.3",
        "The first zstd frame must hold exactly the header line and its newline.",
        "The file was not written by DSH's zstd writer; recompress it as DSH does or use the plain log.";
    ZstdTornRecordInFrame = "zstd-torn-record-in-frame", Error, Zstd, true, "§3.3",
        "A complete zstd frame ends inside a line, or holds an unusable line: inside complete frames there is no crash tail.",
        "The compressed log is corrupt; restore it from a backup.";
    ZstdTornFrame = "zstd-torn-frame", Warning, Zstd, false, "§3.3",
        "The last zstd frame is cut short by a crash; complete lines in it are recovered, the rest is dropped.",
        "Run `dshs repair` to rewrite the recovered lines and close the log.";
    FormatVersionUnsupported = "format-version-unsupported", Unsupported, Version, true, "§4.1, §21.3",
        "The header's version is not one of 0–4: the log comes from a newer or forked harness.",
        "Open it with the harness that wrote it; dshs does not guess at unknown formats.";
    FormatV4Draft = "format-v4-draft", Unsupported, Version, true, "§21.2",
        "The header says version 4 but the bodies are format-3 (V3) shapes: pre-release DSH builds wrote them, and a public fork's released \"legacy V4\" lineage still does. Released upstream DSH refuses such a log and dshs does not read this variant.",
        "Open it with the build that wrote it (the fork's own reader), or re-create the session with a released upstream harness; dshs checks finalized format 4 only.";
    HeaderNotJson = "header-not-json", Error, Header, true, "§4.1",
        "The first line is not valid JSON (DSH: `header line is not valid JSON`). A UTF-8 BOM also causes this.",
        "Restore the header line; without it nothing else can be checked.";
    HeaderFieldInvalid = "header-field-invalid", Error, Header, true, "§4.2",
        "A header field is missing or has the wrong type or value (DSH: `first line is not a session header`).",
        "Fix the named field; DSH refuses the log until then.";
    HeaderCwdNotAbsolute = "header-cwd-not-absolute", Error, Header, true, "§4.2",
        "The header `cwd` is not a string or not an absolute path.",
        "Set `cwd` to the absolute working directory of the session, or remove it.";
    HeaderRetiredField = "header-retired-field", Error, Header, true, "§4.2",
        "The header carries the retired policy fields `sandboxMode`/`approvalPolicy`.",
        "Remove them; current DSH records policy as events.";
    HeaderUnexpectedField = "header-unexpected-field", WarningInV0, Header, true, "§4.2",
        "The header has a key its version does not define (v0 ignores it; v1+ refuse it).",
        "Remove the key, or check that the header version is right.";
    HeaderSeedField = "header-seed-field", Error, Header, true, "§4.2",
        "A v2+ header carries `seedLength`; from v2 on the inherited count comes from `session/end-seed {inherited:true}` and `isSeeded`.",
        "Replace `seedLength` with `isSeeded` and an inherited end-seed marker.";
    SeedLengthExceedsEvents = "seed-length-exceeds-events", Error, Header, true, "§4.3",
        "The header's `seedLength` is larger than the number of events.",
        "The log lost inherited events or the header is wrong; restore it from a backup.";
    SeedMarkerMismatch = "seed-marker-mismatch", Error, Header, true, "§4.3",
        "`isSeeded` disagrees with the presence of a `session/end-seed {inherited:true}` marker.",
        "Make `isSeeded` match the log: true exactly when an inherited end-seed marker exists.";
    PackedRowMalformed = "packed-row-malformed", Error, Rows, true, "§5.2",
        "A packed chunk row (`text-chunks`, `reasoning-chunks`, `tool-call-chunks`) fails storage validation, or appears in a v2+ log.",
        "Corruption of the row; fix it by hand or restore the log.";
    SourceRangesMalformed = "source-ranges-malformed", Error, Rows, true, "§5.3",
        "A stored `sourceEventSeqs` is not a valid plain or range-encoded list (not an array, bad pair, not earlier, duplicate, not increasing).",
        "Corruption of the row; fix the list by hand or restore the log.";
    EnvelopeInvalid = "envelope-invalid", Error, Rows, true, "§5.1",
        "The event envelope is wrong: keys other than type/seq/time/data/surfaceOp/sourceEventSeqs/ignorable, a non-string type, a bad time, missing data, or `ignorable` other than true.",
        "Fix the envelope; DSH refuses the whole log (`invalid event envelope`).";
    SeqNotContiguous = "seq-not-contiguous", Error, Fold, true, "§11.2 step 1",
        "An event reached the surface fold with a seq other than the number of events before it.",
        "Seqs must be dense from 0 in file order; restore lost lines or renumber a hand-built log.";
    UnknownEventType = "unknown-event-type", Unsupported, Vocabulary, true, "§7.1",
        "An event type this format version does not know, not marked `ignorable: true`: written by a newer harness or added by a fork — or a type older DSH builds wrote and later retired (the message says which dshs recognises).",
        "Use the harness that wrote it (for a retired type, the old build), or declare the type with `--known-types FILE` if it is a fork's log-only event.";
    RetiredEventType = "retired-event-type", Error, Vocabulary, true, "§7.2",
        "A required (non-ignorable) `tool/code-dispatch*` event in a v3+ log; these types are retired and always fatal.",
        "Mark it ignorable or remove it; v3+ DSH refuses the log.";
    RetiredLegacyEvent = "retired-legacy-event", Error, Vocabulary, true, "§7.3",
        "A pre-release v0 event (`request/header-delta`, `mode/set`, `request/header` with reason `fallback`) that the v0 reader refuses.",
        "The log predates released DSH; it cannot be opened as is.";
    LegacyShapeNormalized = "legacy-shape-normalized", Warning, Vocabulary, false, "§16",
        "Pre-release v0 shapes that DSH upgrades in memory on load (the file is not rewritten).",
        "Nothing to do; dshs folds, derives and repairs the upgraded shapes as DSH does.";
    LegacyShapeMalformed = "legacy-shape-malformed", Error, Vocabulary, true, "§16",
        "An event matches a pre-release v0 shape trigger but not its exact shape (DSH: `malformed pre-react-loop <type>`).",
        "Fix the event's data to the legacy or the current shape.";
    MessageIdMissing = "message-id-missing", Error, Messages, false, "§9.1",
        "The event lacks a message object with a non-empty string `id`.",
        "Give the message its id; DSH refuses the log (`lacks an identified message`).";
    MessageRoleMismatch = "message-role-mismatch", Error, Messages, false, "§9.1, §9.2",
        "The message role does not match the event type for this format version.",
        "Correct the role (e.g. v4 tool results use role `tool`, v0–v3 use `user`).";
    MessageSourceInvalid = "message-source-invalid", Error, Messages, false, "§9.1, §9.2",
        "The message `source` is not an object with a non-empty string `kind`.",
        "Give the message a valid source.";
    MessageContentInvalid = "message-content-invalid", Error, Messages, false, "§9.1, §9.2",
        "The message `content` is not an array.",
        "Make `content` an array of content blocks.";
    AssistantSourceInvalid = "assistant-source-invalid", Error, Messages, false, "§9.1",
        "An assistant message's source is not `{kind:\"model\"}` with non-empty `provider` and `model`.",
        "Fix the source to name the model that produced the message.";
    ToolResultSourceInvalid = "tool-result-source-invalid", Error, Messages, false, "§9.1, §9.2",
        "A tool result's source is not `{kind:\"tool\"}` with a non-empty `callId` (v4: also a non-empty message id).",
        "Fix the source to name the tool call this result answers.";
    ToolResultBlockInvalid = "tool-result-block-invalid", Error, Messages, false, "§9.1",
        "A v0–v3 tool result's content is not exactly one `tool-result` block with an array `content`.",
        "Wrap the result in exactly one tool-result block.";
    ToolResultCallIdMismatch = "tool-result-call-id-mismatch", Error, Messages, false, "§9.1, §9.2",
        "The tool-result block's `toolCallId` (v4: the message's `toolCallId`) differs from `source.callId`.",
        "Make both ids name the same call.";
    SystemSourceInvalid = "system-source-invalid", Error, Messages, false, "§9.1, §9.2",
        "A system message has the wrong source (v3: `{kind:\"plugin\",plugin}`; v4: `{kind:\"system-prompt\"}`) or, in v4, non-positive turn/step.",
        "Fix the system message payload; a malformed system message is always fatal in v3+.";
    SourceKindPlugin = "source-kind-plugin", Error, Messages, false, "§9.2",
        "A v4 message source has kind `plugin`, which V4 retired (third parties use `plugin:<name>`).",
        "Use a producer-owned kind or `plugin:<name>`.";
    RetiredToolResultBlock = "retired-tool-result-block", Error, Messages, true, "§9.2",
        "A v4 payload holds a `tool-result` content block; V4 retired it (tool results are role `tool` messages). Always fatal.",
        "Rewrite the content without the wrapper block.";
    ToolResultErrorWithoutFlag = "tool-result-error-without-flag", Error, Messages, true, "§8 C8",
        "A v3+ tool result has `data.error` but its failure flag (`isError: true`) is not set.",
        "Set `isError: true` (v3: on the tool-result block; v4: on the message).";
    AssistantStreamMissing = "assistant-stream-missing", Warning, Messages, false, "§10.1",
        "A v2+ `assistant/message` or `assistant/attempt` lacks its embedded `stream` array (or it holds unknown records).",
        "Usually a hand-built log; DSH always writes the stream.";
    RequestHeaderProviderModel = "request-header-provider-model", Error, RequestHeader, false, "§10.1",
        "`request/header.data.header.config` lacks a non-empty `provider` or `model`.",
        "Name the provider and model the request went to.";
    RequestHeaderReasoningEffort = "request-header-reasoning-effort", Error, RequestHeader, false, "§10.1",
        "`config.reasoningEffort` is present but not a non-empty string.",
        "Remove it or give it a value.";
    RequestHeaderAdapterDefaults = "request-header-adapter-defaults", Error, RequestHeader, false, "§10.1",
        "`adapterDefaults` is not an object of `reasoningEffort`/`maxTokens` flags set to true for fields present in `config`.",
        "Fix or drop `adapterDefaults`.";
    RequestHeaderSystemRetired = "request-header-system-retired", Error, RequestHeader, true, "§8 C6",
        "A v3+ `request/header` carries `header.system`; the prompt lives in `system/message`. Always fatal.",
        "Remove `system` from the header and record the prompt as a `system/message`.";
    RequestHeaderEmptyOptional = "request-header-empty-optional", Error, RequestHeader, true, "§8 C7",
        "A v3+ `request/header` has `tools: []` or `adapterDefaults: {}`; canonical V3 omits them instead.",
        "Omit the empty member.";
    RequestHeaderDeferLoading = "request-header-defer-loading", Error, RequestHeader, false, "§9.3",
        "A v4 `request/header` tool has `deferLoading` other than true.",
        "Drop `deferLoading` or set it to true.";
    DeveloperRoleMismatch = "developer-role-mismatch", Error, Developer, true, "§9.3",
        "`developer/message` and role `developer` must occur together.",
        "Use role developer exactly in developer/message events.";
    ToolChangeBlockMisplaced = "tool-change-block-misplaced", Error, Developer, true, "§9.3",
        "A `tool-addition`/`tool-removal` block appears outside a developer message.",
        "Move tool changes into a developer/message.";
    ToolChangeBlockInvalid = "tool-change-block-invalid", Error, Developer, true, "§9.3",
        "A tool-change block lacks a non-empty `toolName`, or a `tool-addition` carries an inline `tool`.",
        "Name the tool; inline definitions belong in the request header.";
    DeveloperHeaderSeq = "developer-header-seq", Error, Developer, true, "§9.3",
        "`data.headerSeq` must be present exactly when tool additions are, and reference an earlier `request/header`.",
        "Point headerSeq at the request header that defines the added tools.";
    DeveloperToolBinding = "developer-tool-binding", Error, Developer, true, "§9.3",
        "An added tool is not defined exactly once, completely (description, parameters), in the referenced header, or its deferLoading is not true.",
        "Fix the referenced header's tool list.";
    SurfaceMetadataOnLogOnly = "surface-metadata-on-log-only", Error, Fold, true, "§8 C2, §11.2 step 2",
        "A log-only event carries `surfaceOp` or `sourceEventSeqs`.",
        "Remove the surface metadata; only message events join the surface.";
    SurfaceOpMissing = "surface-op-missing", Error, Fold, true, "§8 C1, §11.2 step 2",
        "A surface-eligible event has no `surfaceOp`; DSH never appends implicitly.",
        "Add `\"surfaceOp\":\"append\"` (or the replace it was meant to be).";
    SurfaceOpInvalid = "surface-op-invalid", Error, Fold, true, "§11.2 step 2",
        "`surfaceOp` is neither \"append\" nor a replace object.",
        "Use \"append\" or `{op:\"replace\", …}` with this version's endpoint keys.";
    ReplaceOpInvalid = "replace-op-invalid", Error, Fold, true, "§8 C4, §11.2 step 2",
        "A replace `surfaceOp` does not have exactly `op`, and this version's endpoint keys (v0–v2 `start`/`end`, v3+ `startSeq`/`endSeq`) as safe integers ≥ 0.",
        "Use the endpoint key names of the log's version and integer seqs.";
    ReplaceEndpointNotEarlier = "replace-endpoint-not-earlier", Error, Fold, true, "§8 C5, §11.2 step 3",
        "A v3+ replace endpoint is not an earlier seq than the replacing event.",
        "Endpoints must name earlier surface nodes.";
    ReplaceStartNotOnSurface = "replace-start-not-on-surface", Error, Fold, true, "§11.2 step 7",
        "The replace start seq is not a current surface node.",
        "Replace only nodes that are on the surface now (an earlier replacement may have shadowed it).";
    ReplaceEndNotOnSurface = "replace-end-not-on-surface", Error, Fold, true, "§11.2 step 7",
        "The replace end seq is not a current surface node.",
        "Replace only nodes that are on the surface now.";
    ReplaceRangeReversed = "replace-range-reversed", Error, Fold, true, "§11.2 step 7",
        "The replace start node comes after the end node in surface order (positions, not numbers, decide).",
        "Swap the endpoints so start precedes end on the surface.";
    SourceSeqsOnAssistant = "source-seqs-on-assistant", Error, Fold, true, "§8 C3, §11.2 step 6a",
        "A v3+ `assistant/message` carries `sourceEventSeqs`; its provider stream is embedded instead.",
        "Remove `sourceEventSeqs` from the assistant message.";
    SourceSeqsNotArray = "source-seqs-not-array", Error, Fold, true, "§11.2 step 6b",
        "`sourceEventSeqs` is present but not an array.",
        "Make it an array of earlier seqs.";
    SourceSeqsEmpty = "source-seqs-empty", Error, Fold, true, "§11.2 step 6c",
        "`sourceEventSeqs` is empty (allowed only on v0–v2 assistant messages).",
        "Cite the events the node derives from, or omit the list.";
    SourceSeqsInvalidElement = "source-seqs-invalid-element", Error, Fold, true, "§11.2 step 6d",
        "An element of `sourceEventSeqs` is not a safe integer ≥ 0 (v3+: not `-0`).",
        "Cite seqs as plain non-negative integers.";
    SourceSeqsDuplicate = "source-seqs-duplicate", Error, Fold, true, "§11.2 step 6e",
        "`sourceEventSeqs` repeats a seq.",
        "Cite each seq once.";
    SourceSeqsNotEarlier = "source-seqs-not-earlier", Error, Fold, true, "§11.2 step 6f",
        "`sourceEventSeqs` cites a seq that is not earlier than the event itself.",
        "Cite only earlier events.";
    ReplaceMissingShadowedSource = "replace-missing-shadowed-source", Error, Fold, true, "§11.2 step 6g",
        "A replacement does not cite every surface node it shadows in `sourceEventSeqs`.",
        "Add the missing shadowed seqs to `sourceEventSeqs`.";
    ToolResultReplaceNotSingle = "tool-result-replace-not-single", Error, Fold, true, "§11.2 step 7.3",
        "A `tool/result` replacement shadows more or fewer than one node.",
        "A tool result may rewrite exactly one current tool result (start == end).";
    ToolResultReplaceTargetNotResult = "tool-result-replace-target-not-result", Error, Fold, true, "§11.2 step 7.3",
        "A `tool/result` replacement targets a node that is not a tool result.",
        "Point the replacement at the tool result it rewrites.";
    ToolResultReplaceChangesMore = "tool-result-replace-changes-more", Error, Fold, true, "§11.2 step 7.3",
        "A `tool/result` replacement changes more than the result content (turn, step, error, meta, id, source, toolCallId, isError must stay).",
        "Copy everything but the content from the replaced result.";
    SystemHeadProtected = "system-head-protected", Error, Fold, true, "§11.2 step 7.4",
        "Position 0 holds the system prompt; only a `system/message` replacing exactly that node may rewrite it (v3+).",
        "Start the range after the system head, or replace the head alone with a system/message.";
    MessageProjectionNotApplied = "message-projection-not-applied", Warning, Fold, false, "§12.2",
        "A message-projection event (`image/offload`) rewrites derived messages through plugin code dshs does not have.",
        "`derive` shows the stored messages; DSH with the plugin would show them projected.";
    TurnStartWhileOpen = "turn-start-while-open", Lifecycle, Lifecycle, false, "§13.1",
        "A `turn/start` while another turn is still open.",
        "The earlier turn needs its `turn/end`.";
    TurnNumberUnexpected = "turn-number-unexpected", Lifecycle, Lifecycle, false, "§13.1",
        "`turn/start` does not carry the next turn number (turns count 1, 2, 3…).",
        "Renumber the turn.";
    TurnEndMismatch = "turn-end-mismatch", Lifecycle, Lifecycle, false, "§13.1",
        "`turn/end` names a turn other than the open one.",
        "End the open turn.";
    TurnEndWithOpenStep = "turn-end-with-open-step", Lifecycle, Lifecycle, false, "§13.1",
        "`turn/end` while a step is still open.",
        "Close the step with `step/end` first.";
    StepStartWrongTurn = "step-start-wrong-turn", Lifecycle, Lifecycle, false, "§13.1",
        "`step/start` names a turn other than the open one.",
        "Steps belong to the open turn.";
    StepStartWhileOpen = "step-start-while-open", Lifecycle, Lifecycle, false, "§13.1",
        "`step/start` while another step is still open.",
        "Close the earlier step first.";
    StepNumberUnexpected = "step-number-unexpected", Lifecycle, Lifecycle, false, "§13.1",
        "`step/start` does not carry the next step number (steps restart at 1 in each turn).",
        "Renumber the step.";
    EventOutsideOpenStep = "event-outside-open-step", Lifecycle, Lifecycle, false, "§13.1, §13.2",
        "An event that belongs to a step names a turn/step other than the open ones (or none is open).",
        "Record model output, tool calls and results inside their step.";
    EventOutsideTurn = "event-outside-turn", Lifecycle, Lifecycle, false, "§13.1, §13.2",
        "A core execution event (request header/context, todo write) appears outside any open turn.",
        "Record it inside the turn it belongs to.";
    ToolResultWithoutCall = "tool-result-without-call", Lifecycle, Lifecycle, false, "§13.1, §13.2",
        "An appended `tool/result` does not settle an open tool call of this step.",
        "Every result answers exactly one call advertised (and, in v0–v2, started) in the same step.";
    ToolResultReplaceOutsideTurn = "tool-result-replace-outside-turn", Lifecycle, Lifecycle, false, "§13.1",
        "A `tool/result` replacement (pruning) appears outside any open turn.",
        "Record prunes inside a turn.";
    UnresolvedCallAtBoundary = "unresolved-call-at-boundary", Error, Lifecycle, false, "§13.2",
        "A step or turn closes with an advertised or started tool call still unanswered (v3+).",
        "Answer every call before its step ends; crash repair closes only the final open turn.";
    DuplicateCallId = "duplicate-call-id", Error, Lifecycle, false, "§13.2",
        "Two tool-call blocks in the session use the same call id (v3+).",
        "Call ids must be unique within the session.";
    ToolCallMismatch = "tool-call-mismatch", Error, Lifecycle, false, "§13.2",
        "A `tool/call` does not name an advertised, unsettled call, or does not repeat its name and arguments exactly (v3+).",
        "Start only calls the model advertised, with the same name and arguments.";
    ToolResultBeforeStart = "tool-result-before-start", Error, Lifecycle, false, "§13.2",
        "A result for a call that was never started is not the exact not-started repair result (v3+).",
        "Only crash repair may answer an unstarted call; use its exact id, text and error.";
    CommandDoneWithoutRun = "command-done-without-run", Error, Lifecycle, false, "§13.2",
        "`command/done` without a prior `command/run` of the same id, or a repeated run id (v3+).",
        "Pair every command/done with its command/run.";
    OpenTurnAtEnd = "open-turn-at-end", Warning, Lifecycle, false, "§13.3, §14",
        "The log ends inside an open turn (a crash or a live session). DSH closes it on resume.",
        "If no DSH is running this session, `dshs repair` appends the closers DSH would write.";
    CompactionMismatch = "compaction-mismatch", Error, Compaction, false, "§15.4",
        "A compaction's start, summary and end disagree on compactionId, sourceCommandId or turn context (v3+).",
        "The bracket must describe one compaction.";
    CompactionSpanInvalid = "compaction-span-invalid", Error, Compaction, false, "§15.4",
        "A compaction summary or prune names a span that is not exactly the current surface nodes between its endpoints, or covers the system head (v3+).",
        "Make shadowedSeqs list the surface nodes between the endpoints, in surface order.";
    CompactionSummaryCount = "compaction-summary-count", Error, Compaction, false, "§15.4",
        "A successful `compaction/end` does not have exactly one summary (v3+).",
        "Write one compaction/summary per successful compaction.";
    CompactionCheckpointSource = "compaction-checkpoint-source", Error, Compaction, false, "§15.4",
        "A v4 `compact-checkpoint` message does not name the active compaction.",
        "Set the checkpoint source's compactionId to the running compaction.";
    CompactionOpenAtEnd = "compaction-open-at-end", Warning, Compaction, false, "§15.4",
        "A compaction started but did not end before the end of the log (a crash during compaction).",
        "DSH expires it at the next resume; nothing to fix by hand.";
    SqliteStoreEmpty = "sqlite-store-empty", Warning, Sqlite, false, "S2",
        "The SQLite database is empty (a 0-byte file, or no schema version, application id or tables): DSH would initialise it on first use, so it holds no session.",
        "Nothing to check; name the database DSH really writes to (its path comes from the deployment configuration).";
    SqliteNotSessionStore = "sqlite-not-session-store", Unsupported, Sqlite, true, "S0, S2",
        "The SQLite database is not a DSH session store: a DSH search index (application id 0x44534851), another application's database, or one without a schema version.",
        "Point dshs at the session store itself; a search index is rebuilt from the store and holds no session of its own.";
    SqliteSchemaUnsupported = "sqlite-schema-unsupported", Unsupported, Sqlite, true, "S1, S2",
        "The session store's layout version (`PRAGMA user_version`) is neither 17 (current) nor 15 (the one-row-per-event layout): an older development layout or a fork's (19, 20).",
        "Open it with the DSH build that wrote it; DSH never migrates a store and dshs does not guess at other layouts.";
    SqliteSchemaMismatch = "sqlite-schema-mismatch", Unsupported, Sqlite, true, "S2",
        "The store's tables differ from the canonical DDL of its layout version (schema 17: the exact set of schema objects; schema 15: the three tables): a fork's layout or a hand-altered database.",
        "Open it with the harness that wrote it; dshs reads only the layouts upstream DSH wrote.";
    SqliteStoreIdentityInvalid = "sqlite-store-identity-invalid", Error, Sqlite, true, "S2",
        "The store has no valid identity: no `persistence_state` row, an empty `store_id`, or (schema 17) a `store_id` that is not a UUID. DSH refuses to open it.",
        "The database was damaged or assembled by hand; restore it from a backup.";
    SqliteStorageClass = "sqlite-storage-class", Error, Sqlite, true, "S4",
        "An `events` row of the session holds a value of the wrong storage class (e.g. INTEGER `data`, TEXT `source_event_seqs` in schema 17, a negative `seq`); DSH refuses the whole session wherever the row is.",
        "Corruption or a foreign writer; fix or delete the row by hand (with a backup), or restore the database.";
    SqliteSessionRowInvalid = "sqlite-session-row-invalid", Error, Sqlite, true, "S3",
        "The session's `sessions` row breaks a rule of the header mapping (empty id, negative `created_at`, relative `cwd`, `origin` other than subagent, non-UUID `incarnation`, ...); DSH refuses the session before reading any event.",
        "Fix the named column by hand (with a backup), or restore the database.";
    SqliteIsSeededDerived = "sqlite-is-seeded-derived", Warning, Sqlite, false, "S11.5",
        "The session's format version is 2 or later, whose header requires `isSeeded`, but no column holds it: dshs derived it from the inherited `session/end-seed` marker.",
        "No known writer stores such sessions; check where the database came from.";
}

impl CodeInfo {
    /// The specification section of the rule, with its document (`FORMAT.md §6.2`,
    /// `SQLITE.md S4`).
    pub fn rule(&self) -> String {
        let document = match self.area {
            Area::Sqlite => "SQLITE.md",
            _ => "FORMAT.md",
        };
        format!("{document} {}", self.section)
    }
}

impl Code {
    pub fn info(self) -> &'static CodeInfo {
        // The catalogue is declared in enum order.
        &CATALOGUE[self as usize]
    }

    pub fn as_str(self) -> &'static str {
        self.info().name
    }

    pub fn from_name(name: &str) -> Option<Code> {
        CATALOGUE.iter().find(|c| c.name == name).map(|c| c.code)
    }

    /// The severity of this code while the version is unknown; a log's dialect decides the
    /// version-dependent rules ([`Dialect::severity`](super::dialect::Dialect::severity)).
    pub fn severity(self) -> Severity {
        match self.info().severity {
            SeverityRule::Error | SeverityRule::Unsupported => Severity::Error,
            SeverityRule::Warning => Severity::Warning,
            SeverityRule::WarningInV0 => Severity::Error,
            SeverityRule::Lifecycle => Severity::Warning,
        }
    }

    pub fn is_unsupported(self) -> bool {
        self.info().severity == SeverityRule::Unsupported
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogue_is_in_enum_order_and_names_are_unique_kebab_case() {
        for (i, info) in CATALOGUE.iter().enumerate() {
            assert_eq!(info.code as usize, i, "{} out of order", info.name);
            assert!(
                info.name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "{}",
                info.name
            );
            assert_eq!(Code::from_name(info.name), Some(info.code));
        }
        let mut names: Vec<_> = CATALOGUE.iter().map(|c| c.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), CATALOGUE.len());
    }
}
