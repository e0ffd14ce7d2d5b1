//! The agent's tools as apiary sees them: tool calls, plans and usage it reports (surfaced as
//! [`AgentEvent`]s), and its permission requests, decided by the persona's `x-tool-policy` first
//! and the operator's `--permission` second.
//!
//! A permission request names its tool loosely: ACP gives a `toolCallId`, a `title` and maybe a
//! `kind`; Claude Code adds the tool's name in `_meta.claudeCode.toolName` of the `tool_call`
//! update that precedes the request. So each session's recent tool calls are remembered (a
//! bounded map) and a request takes the name and kind of its call from there when it lacks them.

use std::collections::HashMap;
use std::sync::Arc;

use agent_client_protocol_schema::v1 as acp;
use apiary_core::pack::ToolPolicy;
use apiary_core::pack::tool_policy::ToolUse;
use serde_json::{Map, Value, json};

use super::PermissionPolicy;
use super::stderr::visible;

/// Tool calls remembered per agent, to name the tool of a later permission request.
const MAX_REMEMBERED: usize = 1024;

/// Something the agent did during a turn that the operator may want to see.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    /// A permission request and how it was answered.
    Permission {
        session: String,
        tool: Option<String>,
        kind: Option<String>,
        title: Option<String>,
        allowed: bool,
        /// `tool-policy` (the persona's `x-tool-policy` refused it), `apiary-tools` (one of
        /// apiary's own tools, which the policy admits) or `permission` (the operator's
        /// `--permission` decided).
        decided_by: &'static str,
        /// Why the tool policy refused it.
        reason: Option<String>,
    },
    /// A tool call started or changed status.
    ToolCall {
        session: String,
        id: String,
        tool: Option<String>,
        kind: Option<String>,
        title: Option<String>,
        status: Option<String>,
    },
    /// The agent's plan: how many entries, how many completed.
    Plan {
        session: String,
        entries: usize,
        completed: usize,
    },
    /// Context usage the agent reports (`usage_update`): tokens in use, the window, the cost.
    Usage {
        session: String,
        used: u64,
        size: u64,
        cost: Option<(f64, String)>,
    },
}

/// Where an agent's events go (the harness turns them into notes).
#[derive(Clone)]
pub struct AgentEvents(pub Arc<dyn Fn(AgentEvent) + Send + Sync>);

impl std::fmt::Debug for AgentEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AgentEvents")
    }
}

/// What is known of one tool call.
#[derive(Debug, Clone, Default)]
struct Known {
    name: Option<String>,
    kind: Option<String>,
    title: Option<String>,
}

/// Recent tool calls, by call id.
#[derive(Debug, Default)]
pub struct ToolCalls(HashMap<String, Known>);

/// A short printable field of untrusted agent output.
fn text(v: Option<&Value>, max: usize) -> Option<String> {
    let s = visible(v?.as_str()?.trim(), max);
    (!s.is_empty()).then_some(s)
}

/// The tool's own name in a tool call's `_meta` (Claude Code's `claudeCode.toolName`, or a plain
/// `toolName`).
fn meta_name(call: &Value) -> Option<String> {
    let meta = call.get("_meta")?;
    text(
        meta.pointer("/claudeCode/toolName")
            .or_else(|| meta.get("toolName")),
        128,
    )
}

impl ToolCalls {
    /// Remembers what a `tool_call` / `tool_call_update` says; returns the event to surface, if
    /// the update is worth one (a new call or a status change).
    pub fn update(&mut self, session: &str, update: &Value) -> Option<AgentEvent> {
        let id = text(update.get("toolCallId"), 128)?;
        if self.0.len() >= MAX_REMEMBERED && !self.0.contains_key(&id) {
            self.0.clear();
        }
        let known = self.0.entry(id.clone()).or_default();
        let new = update.get("sessionUpdate").and_then(Value::as_str) == Some("tool_call");
        if let Some(n) = meta_name(update) {
            known.name = Some(n);
        }
        if let Some(k) = text(update.get("kind"), 32) {
            known.kind = Some(k);
        }
        if let Some(t) = text(update.get("title"), 200) {
            known.title = Some(t);
        }
        let status = text(update.get("status"), 32);
        (new || status.is_some()).then(|| AgentEvent::ToolCall {
            session: session.to_string(),
            id,
            tool: known.name.clone(),
            kind: known.kind.clone(),
            title: known.title.clone(),
            status,
        })
    }

    fn known(&self, call: &Value) -> Known {
        let remembered = call
            .get("toolCallId")
            .and_then(Value::as_str)
            .and_then(|id| self.0.get(id))
            .cloned()
            .unwrap_or_default();
        Known {
            name: meta_name(call).or(remembered.name),
            kind: text(call.get("kind"), 32).or(remembered.kind),
            title: text(call.get("title"), 200).or(remembered.title),
        }
    }
}

/// The answer to a `session/request_permission` request (`params`): the persona's tool policy
/// first (a refused tool is rejected whatever `--permission` says), then the operator's policy.
pub fn decide_permission(
    params: &Value,
    tools: &ToolPolicy,
    operator: PermissionPolicy,
    calls: &ToolCalls,
) -> (acp::RequestPermissionOutcome, AgentEvent) {
    let session = text(params.get("sessionId"), 200).unwrap_or_default();
    let call = params.get("toolCall").cloned().unwrap_or(Value::Null);
    let known = calls.known(&call);
    let options: Vec<acp::PermissionOption> = params
        .get("options")
        .and_then(|o| serde_json::from_value(o.clone()).ok())
        .unwrap_or_default();
    let verdict = tools.decide(ToolUse {
        name: known.name.as_deref(),
        kind: known.kind.as_deref(),
    });
    let (outcome, decided_by, reason) = match verdict {
        Err(why) => (
            choose(PermissionPolicy::Deny, &options),
            "tool-policy",
            Some(why),
        ),
        // apiary's own tools check and limit every call themselves (see `apiary-mcp`): what the
        // persona's policy admits of them needs no operator answer.
        Ok(()) if known.name.as_deref().is_some_and(is_apiary_tool) => (
            choose(PermissionPolicy::AllowOnce, &options),
            "apiary-tools",
            None,
        ),
        Ok(()) => (choose(operator, &options), "permission", None),
    };
    let allowed = selected_kind(&outcome, &options).is_some_and(|k| {
        matches!(
            k,
            acp::PermissionOptionKind::AllowOnce | acp::PermissionOptionKind::AllowAlways
        )
    });
    let event = AgentEvent::Permission {
        session,
        tool: known.name,
        kind: known.kind,
        title: known.title,
        allowed,
        decided_by,
        reason,
    };
    (outcome, event)
}

/// One of apiary's own MCP tools, as Claude Code names them (`mcp__apiary__post`).
fn is_apiary_tool(name: &str) -> bool {
    name.strip_prefix("mcp__")
        .and_then(|rest| rest.strip_prefix(apiary_mcp::SERVER_NAME))
        .is_some_and(|rest| rest.starts_with("__"))
}

/// The option picked by kind: a reject for `Deny` (cancelled when there is none), allow-once for
/// `AllowOnce` (else a reject).
pub fn choose(
    policy: PermissionPolicy,
    options: &[acp::PermissionOption],
) -> acp::RequestPermissionOutcome {
    use acp::PermissionOptionKind as K;
    let pick = |kinds: &[K]| {
        kinds
            .iter()
            .find_map(|k| options.iter().find(|o| o.kind == *k))
            .map(|o| {
                acp::RequestPermissionOutcome::Selected(acp::SelectedPermissionOutcome::new(
                    o.option_id.clone(),
                ))
            })
    };
    let choice = match policy {
        PermissionPolicy::Deny => pick(&[K::RejectOnce, K::RejectAlways]),
        PermissionPolicy::AllowOnce => pick(&[K::AllowOnce, K::RejectOnce, K::RejectAlways]),
    };
    choice.unwrap_or(acp::RequestPermissionOutcome::Cancelled)
}

fn selected_kind(
    outcome: &acp::RequestPermissionOutcome,
    options: &[acp::PermissionOption],
) -> Option<acp::PermissionOptionKind> {
    let acp::RequestPermissionOutcome::Selected(s) = outcome else {
        return None;
    };
    options
        .iter()
        .find(|o| o.option_id == s.option_id)
        .map(|o| o.kind)
}

/// A `plan` update as an event.
pub fn plan_event(session: &str, update: &Value) -> Option<AgentEvent> {
    let entries = update.get("entries")?.as_array()?;
    Some(AgentEvent::Plan {
        session: session.to_string(),
        entries: entries.len(),
        completed: entries
            .iter()
            .filter(|e| e.get("status").and_then(Value::as_str) == Some("completed"))
            .count(),
    })
}

/// A `usage_update` as an event.
pub fn usage_event(session: &str, update: &Value) -> Option<AgentEvent> {
    let cost = update.get("cost").and_then(|c| {
        Some((
            c.get("amount")?.as_f64()?,
            text(c.get("currency"), 8).unwrap_or_default(),
        ))
    });
    Some(AgentEvent::Usage {
        session: session.to_string(),
        used: update.get("used")?.as_u64()?,
        size: update.get("size").and_then(Value::as_u64).unwrap_or(0),
        cost,
    })
}

/// The `_meta` of `session/new` that hands the policy to runtimes with a deny list of their own:
/// Claude Code reads `claudeCode.options` (its Agent SDK options; `disallowedTools` removes tools
/// from the model's reach), given its own names for every denied tool whatever runtime's name
/// the policy used. `None` when there is nothing to hand over.
pub fn session_meta(tools: &ToolPolicy) -> Option<Map<String, Value>> {
    let denied = tools.denied_claude_code_names();
    if denied.is_empty() {
        return None;
    }
    let meta = json!({"claudeCode": {"options": {"disallowedTools": denied}}});
    meta.as_object().cloned()
}

/// The read-only mode a `session/new` answer offers (Codex's `read-only` approval preset), as
/// the config option id and value to select, when it is not already current.
pub fn read_only_mode(new_session: &Value) -> Option<(String, String)> {
    let options = new_session.get("configOptions")?.as_array()?;
    let opt = options
        .iter()
        .find(|o| o.get("category").and_then(Value::as_str) == Some("mode"))?;
    let offered = opt
        .get("options")?
        .as_array()?
        .iter()
        .take(100)
        .filter_map(|v| v.get("value")?.as_str())
        .find(|v| *v == "read-only")?;
    if opt.get("currentValue").and_then(Value::as_str) == Some(offered) {
        return None;
    }
    Some((opt.get("id")?.as_str()?.to_string(), offered.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> Value {
        json!([
            {"optionId": "always", "name": "Always", "kind": "allow_always"},
            {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
            {"optionId": "reject", "name": "Reject", "kind": "reject_once"}
        ])
    }

    #[test]
    fn the_tool_policy_overrides_allow_once() {
        let mut calls = ToolCalls::default();
        let update = json!({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Write x",
            "kind": "edit", "_meta": {"claudeCode": {"toolName": "Write"}}});
        assert!(calls.update("s", &update).is_some());
        let req = json!({"sessionId": "s", "toolCall": {"toolCallId": "t1", "title": "Write x"},
            "options": options()});
        let deny = ToolPolicy {
            deny: vec!["Write".into()],
            ..ToolPolicy::default()
        };
        let (outcome, event) = decide_permission(&req, &deny, PermissionPolicy::AllowOnce, &calls);
        assert_eq!(
            serde_json::to_value(&outcome).unwrap(),
            json!({"outcome": "selected", "optionId": "reject"})
        );
        let AgentEvent::Permission {
            allowed,
            decided_by,
            tool,
            ..
        } = event
        else {
            panic!("{event:?}")
        };
        assert!(!allowed);
        assert_eq!(decided_by, "tool-policy");
        assert_eq!(tool.as_deref(), Some("Write"));

        let (outcome, event) = decide_permission(
            &req,
            &ToolPolicy::default(),
            PermissionPolicy::AllowOnce,
            &calls,
        );
        assert_eq!(
            serde_json::to_value(&outcome).unwrap(),
            json!({"outcome": "selected", "optionId": "allow"})
        );
        assert!(matches!(
            event,
            AgentEvent::Permission {
                allowed: true,
                decided_by: "permission",
                ..
            }
        ));
    }

    #[test]
    fn hostile_requests_are_rejected_not_trusted() {
        let calls = ToolCalls::default();
        let allow = ToolPolicy {
            allow: vec!["Read".into()],
            ..ToolPolicy::default()
        };
        // No options at all, a forged name full of escapes.
        let req = json!({"sessionId": 7, "toolCall": {"toolCallId": "x",
            "_meta": {"toolName": "Read\u{1b}[2J"}}, "options": "nope"});
        let (outcome, event) = decide_permission(&req, &allow, PermissionPolicy::AllowOnce, &calls);
        assert_eq!(
            serde_json::to_value(&outcome).unwrap(),
            json!({"outcome": "cancelled"})
        );
        let AgentEvent::Permission { tool, allowed, .. } = event else {
            panic!()
        };
        assert!(!allowed);
        assert!(!tool.unwrap().contains('\u{1b}'));
    }

    #[test]
    fn claude_gets_the_deny_list_and_codex_its_read_only_mode() {
        let p = ToolPolicy {
            deny: vec![
                "run_shell_command".into(),
                "kind:fetch".into(),
                "mcp__*".into(),
            ],
            ..ToolPolicy::default()
        };
        assert_eq!(
            Value::Object(session_meta(&p).unwrap()),
            json!({"claudeCode": {"options": {"disallowedTools": ["Bash", "mcp__acp__Bash"]}}})
        );
        assert!(session_meta(&ToolPolicy::default()).is_none());
        let answer = json!({"configOptions": [{"id": "mode", "category": "mode", "currentValue": "auto",
            "options": [{"value": "read-only"}, {"value": "auto"}]}]});
        assert_eq!(
            read_only_mode(&answer),
            Some(("mode".into(), "read-only".into()))
        );
    }
}
