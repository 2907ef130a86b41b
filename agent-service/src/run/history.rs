//! The run's trace: agent_chat_history (JSON, every step) and agent_chat_history_md
//! (readable), plus the analysis line.

use serde_json::{Value, json};

use super::super::tools::clip;

#[derive(Default)]
pub struct History {
    steps: Vec<Value>,
}

impl History {
    pub fn model(
        &mut self,
        turn: u32,
        text: &str,
        calls: &[docchat_inference::ToolCall],
        usage: (u64, u64),
    ) {
        self.steps.push(json!({
            "turn": turn, "role": "assistant", "content": text,
            "tool_calls": calls.iter().map(|c| json!({"id": c.id, "name": c.name, "arguments": c.arguments})).collect::<Vec<_>>(),
            "prompt_tokens": usage.0, "completion_tokens": usage.1,
        }));
    }

    pub fn tool(&mut self, turn: u32, id: &str, name: &str, ok: bool, result: &str, millis: u128) {
        self.steps.push(json!({
            "turn": turn, "role": "tool", "tool_call_id": id, "name": name, "ok": ok,
            "content": clip(result, 20_000), "elapsed_ms": millis as u64,
        }));
    }

    pub fn note(&mut self, turn: u32, text: &str) {
        self.steps
            .push(json!({"turn": turn, "role": "system", "content": text}));
    }

    pub fn json(&self) -> String {
        Value::Array(self.steps.clone()).to_string()
    }

    pub fn markdown(&self) -> String {
        let mut md = String::new();
        for s in &self.steps {
            let turn = s["turn"].as_u64().unwrap_or(0);
            match s["role"].as_str() {
                Some("assistant") => {
                    md.push_str(&format!("### Turn {turn}: assistant\n\n"));
                    if let Some(t) = s["content"].as_str().filter(|t| !t.is_empty()) {
                        md.push_str(t);
                        md.push_str("\n\n");
                    }
                    for c in s["tool_calls"].as_array().into_iter().flatten() {
                        md.push_str(&format!(
                            "- calls `{}` with `{}`\n",
                            c["name"].as_str().unwrap_or(""),
                            clip(c["arguments"].as_str().unwrap_or(""), 2000)
                        ));
                    }
                    md.push('\n');
                }
                Some("tool") => {
                    md.push_str(&format!(
                        "#### `{}` {}\n\n```\n{}\n```\n\n",
                        s["name"].as_str().unwrap_or(""),
                        if s["ok"].as_bool() == Some(true) {
                            "ok"
                        } else {
                            "failed"
                        },
                        clip(s["content"].as_str().unwrap_or(""), 4000)
                    ));
                }
                _ => md.push_str(&format!("> {}\n\n", s["content"].as_str().unwrap_or(""))),
            }
        }
        md
    }
}
