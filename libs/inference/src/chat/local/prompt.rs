//! Chat prompt formats: how a model's messages are laid out as tokens (ChatML, Gemma).

use super::tokenizer::Tokenizer;
use crate::chat::ChatMessage;

/// How a model's messages are laid out (see the [`local`](super) module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChatFormat {
    ChatMl {
        im_start: u32,
        im_end: u32,
        /// The template's system prompt for conversations without one.
        default_system: Option<String>,
    },
    Gemma {
        start_of_turn: u32,
        end_of_turn: u32,
    },
}

impl ChatFormat {
    /// The format of a vocabulary (and its chat template, if the file has one).
    pub(super) fn detect(t: &Tokenizer, template: Option<&str>) -> Option<ChatFormat> {
        if let (Some(im_start), Some(im_end)) =
            (t.token_id("<|im_start|>"), t.token_id("<|im_end|>"))
        {
            return Some(ChatFormat::ChatMl {
                im_start,
                im_end,
                default_system: template.and_then(default_system_prompt),
            });
        }
        match (t.token_id("<start_of_turn>"), t.token_id("<end_of_turn>")) {
            (Some(start_of_turn), Some(end_of_turn)) => Some(ChatFormat::Gemma {
                start_of_turn,
                end_of_turn,
            }),
            _ => None,
        }
    }

    pub(super) fn end_of_turn(&self) -> u32 {
        match *self {
            ChatFormat::ChatMl { im_end, .. } => im_end,
            ChatFormat::Gemma { end_of_turn, .. } => end_of_turn,
        }
    }

    /// The prompt of `messages` in this format (see the [`local`](super) module docs), in the
    /// tokens of `t`.
    pub(super) fn prompt(&self, t: &Tokenizer, messages: &[ChatMessage]) -> Vec<u32> {
        let system: Vec<&str> = messages
            .iter()
            .filter(|m| m.role == "system")
            .map(|m| m.content.trim())
            .filter(|c| !c.is_empty())
            .collect();
        let system = (!system.is_empty()).then(|| system.join("\n\n"));
        let mut ids = t.start();
        let turn = |ids: &mut Vec<u32>, (open, close): (u32, u32), role: &str, content: &str| {
            ids.push(open);
            ids.extend(t.encode(&format!("{role}\n")));
            ids.extend(t.encode(content));
            ids.push(close);
            ids.extend(t.encode("\n"));
        };
        let talk = messages.iter().filter(|m| m.role != "system");
        match self {
            ChatFormat::ChatMl {
                im_start,
                im_end,
                default_system,
            } => {
                let marks = (*im_start, *im_end);
                if let Some(s) = system.as_deref().or(default_system.as_deref()) {
                    turn(&mut ids, marks, "system", s);
                }
                for m in talk {
                    let role = if m.role == "assistant" || m.role == "model" {
                        "assistant"
                    } else {
                        "user"
                    };
                    turn(&mut ids, marks, role, m.content.trim());
                }
                ids.push(*im_start);
                ids.extend(t.encode("assistant\n"));
            }
            ChatFormat::Gemma {
                start_of_turn,
                end_of_turn,
            } => {
                let marks = (*start_of_turn, *end_of_turn);
                let mut pending_system = system;
                for m in talk {
                    if m.role == "assistant" || m.role == "model" {
                        turn(&mut ids, marks, "model", m.content.trim());
                        continue;
                    }
                    let content = match pending_system.take() {
                        Some(s) => format!("{s}\n\n{}", m.content.trim()),
                        None => m.content.trim().to_owned(),
                    };
                    turn(&mut ids, marks, "user", &content);
                }
                if let Some(s) = pending_system {
                    turn(&mut ids, marks, "user", &s);
                }
                ids.push(*start_of_turn);
                ids.extend(t.encode("model\n"));
            }
        }
        ids
    }
}

/// The system prompt a ChatML template writes when the first message is not a system one:
/// the first string literal of the template that holds a whole system turn of plain text,
/// `'<|im_start|>system\n{prompt}<|im_end|>`. SmolLM2's writes it under
/// `{% if loop.first and messages[0]['role'] != 'system' %}`, Qwen2.5's in the `else` of
/// `{%- if messages[0]['role'] == 'system' %}`. A turn built from the messages
/// (`'<|im_start|>system\n' + messages[0]['content'] + ...`) ends its literal before any
/// text and is no prompt, nor is text with quotes, braces, `+` or escapes in it.
fn default_system_prompt(template: &str) -> Option<String> {
    const OPEN: &str = "<|im_start|>system";
    let mut at = 0;
    while let Some(found) = template[at..].find(OPEN) {
        let open = at + found;
        at = open + OPEN.len();
        // The turn starts a string literal: its quote stands right before.
        let Some(quote @ ('\'' | '"')) = template[..open].chars().next_back() else {
            continue;
        };
        // The newline after the role: the character itself (SmolLM2) or the escape `\n`
        // (Qwen2.5).
        let rest = &template[at..];
        let Some(rest) = rest.strip_prefix('\n').or_else(|| rest.strip_prefix("\\n")) else {
            continue;
        };
        let literal = &rest[..rest.find(quote).unwrap_or(rest.len())];
        let Some(len) = literal.find("<|im_end|>") else {
            continue;
        };
        let prompt = literal[..len].trim();
        if !prompt.is_empty() && !prompt.contains(['{', '}', '\'', '"', '+', '\\']) {
            return Some(prompt.to_owned());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_system_prompts_of_chatml_templates() {
        // SmolLM2's (newlines as characters), under `!= 'system'`.
        let smollm2 = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}";
        assert_eq!(
            default_system_prompt(smollm2).as_deref(),
            Some("You are a helpful AI assistant named SmolLM, trained by Hugging Face")
        );
        // Qwen2.5's (newlines as escapes), in the `else` of `== 'system'`, after a tools
        // branch and a turn built from the first message.
        let qwen = r#"{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}"#;
        assert_eq!(
            default_system_prompt(qwen).as_deref(),
            Some("You are Qwen, created by Alibaba Cloud. You are a helpful assistant.")
        );
        // Only turns built from the messages, or none at all: no default.
        for none in [
            "{{ '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}",
            "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' }}",
            "{{ \"<|im_start|>system\\n{{ x }}<|im_end|>\" }}",
            "",
        ] {
            assert_eq!(default_system_prompt(none), None, "{none:?}");
        }
    }
}
