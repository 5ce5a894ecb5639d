//! The event type of a row, interned once when the row is decoded: rules match on [`Kind`],
//! not on type strings. The version-dependent vocabulary stays in `dialect`/`vocab`.

macro_rules! kinds {
    ($($kind:ident = $name:literal,)*) => {
        /// Every event type FORMAT.md names (any version), and `Other` for the rest.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Kind {
            $($kind,)*
            Other,
        }

        impl Kind {
            pub fn of(ty: &str) -> Kind {
                match ty {
                    $($name => Kind::$kind,)*
                    _ => Kind::Other,
                }
            }

            /// The type string FORMAT.md gives this kind (`""` for [`Kind::Other`], which
            /// stands for any type it does not name).
            pub const fn name(self) -> &'static str {
                match self {
                    $(Kind::$kind => $name,)*
                    Kind::Other => "",
                }
            }
        }
    };
}

kinds! {
    AgentPresetSelected = "agent-preset/selected",
    AgentInboxSpliced = "agent/inbox/spliced",
    ApprovalAsked = "approval/asked",
    ApprovalDecided = "approval/decided",
    ApprovalPolicy = "approval/policy",
    AssistantAttempt = "assistant/attempt",
    AssistantChunk = "assistant/chunk",
    AssistantMessage = "assistant/message",
    CommandDone = "command/done",
    CommandRun = "command/run",
    CompactionEnd = "compaction/end",
    CompactionPrune = "compaction/prune",
    CompactionStart = "compaction/start",
    CompactionSummary = "compaction/summary",
    DeliverablesPresented = "deliverables/presented",
    DeveloperMessage = "developer/message",
    FeedbackMessageDelete = "feedback/message-delete",
    FeedbackMessagePut = "feedback/message-put",
    FeedbackRecord = "feedback/record",
    GoalChange = "goal/change",
    HookInvoked = "hook/invoked",
    HookResult = "hook/result",
    ImageOffload = "image/offload",
    LlmRetry = "llm/retry",
    LlmRetryStarted = "llm/retry-started",
    ModelSelection = "model/selection",
    PermissionPreset = "permission/preset",
    PlanMode = "plan/mode",
    RequestContext = "request/context",
    RequestHeader = "request/header",
    SandboxMode = "sandbox/mode",
    ScheduleChange = "schedule/change",
    SessionLogDeepseekDeliveryAccepted = "session-log-deepseek/delivery-accepted",
    SessionEndSeed = "session/end-seed",
    SessionTitle = "session/title",
    SessionTitleLlmRequest = "session/title-llm-request",
    StepEnd = "step/end",
    StepStart = "step/start",
    SubagentCatalog = "subagent/catalog",
    SubagentDescriptor = "subagent/descriptor",
    SubagentModelSelectionPolicy = "subagent/model-selection-policy",
    SystemMessage = "system/message",
    TeamMember = "team/member",
    TeamMessageDelivered = "team/message/delivered",
    TeamMessageQueued = "team/message/queued",
    TeamTask = "team/task",
    TodoWrite = "todo/write",
    ToolWorkflowAgentEnd = "tool-workflow/agent-end",
    ToolWorkflowAgentStart = "tool-workflow/agent-start",
    ToolWorkflowRunEnd = "tool-workflow/run-end",
    ToolWorkflowRunStart = "tool-workflow/run-start",
    ToolCall = "tool/call",
    ToolCodeDispatch = "tool/code-dispatch",
    ToolCodeDispatchStart = "tool/code-dispatch-start",
    ToolPtcDispatch = "tool/ptc-dispatch",
    ToolPtcDispatchStart = "tool/ptc-dispatch-start",
    ToolResult = "tool/result",
    TurnEnd = "turn/end",
    TurnStart = "turn/start",
    UserMessage = "user/message",
    WebDeepseekSearchLlmRequest = "web/deepseek-search-llm-request",
    WorkspaceChanges = "workspace/changes",
}

/// Whether an event of type `ty` passes a type filter: empty passes everything, `tool/`
/// names a family, anything else one type.
pub fn type_matches(filter: &[String], ty: &str) -> bool {
    filter.is_empty()
        || filter.iter().any(|t| {
            if t.ends_with('/') {
                ty.starts_with(t.as_str())
            } else {
                ty == t
            }
        })
}

/// One row as dshs writes it (a closer, a compaction): `{"type":…,"seq":…,"time":…,"data":`
/// then `data`, then `rest` (the members after `data`, each with its leading comma) and `}`.
pub fn row(kind: Kind, seq: u64, time: i64, data: &str, rest: &str) -> String {
    format!(
        r#"{{"type":"{}","seq":{seq},"time":{time},"data":{data}{rest}}}"#,
        kind.name()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::dialect::DIALECTS;

    #[test]
    fn every_type_of_every_dialect_has_its_own_kind() {
        let mut seen = std::collections::HashSet::new();
        for d in &DIALECTS {
            for ty in crate::log::dialect::COMMON_TYPES
                .iter()
                .chain(d.extra_types)
            {
                let kind = Kind::of(ty);
                assert_ne!(kind, Kind::Other, "{ty}");
                seen.insert((kind, *ty));
            }
        }
        let kinds: std::collections::HashSet<Kind> = seen.iter().map(|(k, _)| *k).collect();
        assert_eq!(kinds.len(), seen.len());
        assert_eq!(Kind::of("fork/custom"), Kind::Other);
        for (kind, ty) in &seen {
            assert_eq!(kind.name(), *ty);
        }
        assert_eq!(Kind::Other.name(), "");
    }
}
