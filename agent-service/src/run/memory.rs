//! The run's memory block (RunStart.memory, agent_file or agent_tool mode).
//!
//! agent_file: before the first turn the content is written to [`file_path`] (a hidden
//! folder, so it is a working file: never stored as a session document nor restored over
//! the block's current content) and the system prompt says where it is and whether edits
//! are kept. After the run, when the caller may edit the block and the file changed, the
//! file's content is saved back through chat's MemoryBlockService as the caller (its
//! access rules decide, once; the whole content is written in one statement — concurrent
//! runs: the last save wins). A file over max_content_length, not UTF-8 or gone is not
//! saved, and the answer says why (a line appended to it) as does the run's history.
//!
//! agent_tool: the `memory` tool (tools/memory.rs) is offered and the system prompt names it.

use std::path::Path;

use docchat_common::Caller;
use docchat_common::clients::Clients;
use docchat_proto::agent::v1 as pb;
use docchat_proto::chat::v1 as chat;

use crate::paths;
use crate::tools::memory::limit_words;

/// The folder of memory files in the workspace.
pub const DIR: &str = ".memory";
/// The largest memory file read back (bytes).
const MAX_READ: u64 = 16 << 20;

pub fn is_file_mode(m: &pb::RunMemory) -> bool {
    m.injection_mode == "agent_file"
}

pub fn is_tool_mode(m: &pb::RunMemory) -> bool {
    m.injection_mode == "agent_tool"
}

/// `.memory/<name>.md`: the name's letters, digits, `-`, `_` and `.` kept, anything else
/// `_`, no leading dot, at most 100 characters.
pub fn file_path(name: &str) -> String {
    let clean: String = name
        .trim()
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(100)
        .collect();
    let clean = clean.trim_start_matches('.');
    let clean = if clean.is_empty() { "memory" } else { clean };
    format!("{DIR}/{clean}.md")
}

/// The system prompt's lines about the block (so `prompt_raw` shows the injection).
pub fn instructions(m: &pb::RunMemory) -> Option<String> {
    let mut out = if is_file_mode(m) {
        let path = file_path(&m.name);
        let kept = if m.editable {
            format!(
                "What the file holds when you finish is saved back to the memory block, so edit it to remember things for later chats ({}).",
                limit_words(m.max_content_length)
            )
        } else {
            "The block is read-only for you: changes you make to the file are not kept.".to_owned()
        };
        format!(
            "\n\nMemory block \"{}\" is the file {path} of your workspace; read it before you answer. {kept}",
            m.name
        )
    } else if is_tool_mode(m) {
        let rights = if m.editable {
            format!(
                "read it, replace it or append to it ({})",
                limit_words(m.max_content_length)
            )
        } else {
            "read it (it is read-only for you)".to_owned()
        };
        format!(
            "\n\nMemory block \"{}\" is reached through the `{}` tool: {rights}. Read it before you answer.",
            m.name,
            crate::tools::memory::NAME
        )
    } else {
        return None;
    };
    if !m.amendment.trim().is_empty() {
        out.push('\n');
        out.push_str(m.amendment.trim());
    }
    Some(out)
}

/// Writes the block's content to its file, replacing whatever an earlier run left at
/// `.memory` or at the file's path (a link is removed, never followed).
pub async fn place(workspace: &Path, m: &pb::RunMemory) -> Result<(), String> {
    let rel = file_path(&m.name);
    let dir = workspace.join(DIR);
    if let Ok(meta) = tokio::fs::symlink_metadata(&dir).await
        && !meta.is_dir()
    {
        tokio::fs::remove_file(&dir)
            .await
            .map_err(|e| format!("cannot replace {DIR}: {e}"))?;
    }
    tokio::fs::create_dir_all(&dir)
        .await
        .map_err(|e| format!("cannot create {DIR}: {e}"))?;
    let path = workspace.join(&rel);
    if let Ok(meta) = tokio::fs::symlink_metadata(&path).await {
        let removed = if meta.is_dir() {
            tokio::fs::remove_dir_all(&path).await
        } else {
            tokio::fs::remove_file(&path).await
        };
        removed.map_err(|e| format!("cannot replace {rel}: {e}"))?;
    }
    tokio::fs::write(&path, &m.content)
        .await
        .map_err(|e| format!("cannot write {rel}: {e}"))
}

/// What became of the file after the run.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The file holds the block's content: nothing to save.
    Unchanged,
    Saved,
    /// Changed, but the caller may not edit the block: nothing saved (as the prompt said).
    ReadOnly,
    /// Changed and not saved; the user is told why.
    NotSaved(String),
}

impl Outcome {
    /// The history's line.
    pub fn note(&self, m: &pb::RunMemory) -> Option<String> {
        let path = file_path(&m.name);
        match self {
            Outcome::Unchanged => None,
            Outcome::Saved => Some(format!("memory block \"{}\" saved from {path}", m.name)),
            Outcome::ReadOnly => Some(format!(
                "memory block \"{}\" is read-only for the user: the changes to {path} were not saved",
                m.name
            )),
            Outcome::NotSaved(why) => Some(format!(
                "memory block \"{}\" was not updated: {why}",
                m.name
            )),
        }
    }

    /// The line the answer gets (only when something the agent meant to keep was lost).
    pub fn notice(&self, m: &pb::RunMemory) -> Option<String> {
        match self {
            Outcome::NotSaved(why) => Some(format!(
                "(Memory block \"{}\" was not updated: {why}.)",
                m.name
            )),
            _ => None,
        }
    }
}

/// Reads the file back and saves it to the block when it changed and may be saved.
pub async fn save_back(
    clients: Option<&Clients>,
    caller: &Caller,
    workspace: &Path,
    m: &pb::RunMemory,
) -> Outcome {
    let rel = file_path(&m.name);
    let content = match read_back(workspace, &rel).await {
        Ok(c) => c,
        Err(why) => {
            return if m.editable {
                Outcome::NotSaved(why)
            } else {
                Outcome::ReadOnly
            };
        }
    };
    if content == m.content {
        return Outcome::Unchanged;
    }
    if !m.editable {
        return Outcome::ReadOnly;
    }
    let chars = content.chars().count() as u64;
    let max = m.max_content_length;
    if max > 0 && chars > max.unsigned_abs() {
        return Outcome::NotSaved(format!(
            "{rel} holds {chars} characters, over the block's limit of {max}"
        ));
    }
    let Some(clients) = clients else {
        return Outcome::NotSaved("memory blocks are unavailable here".into());
    };
    let request = chat::UpdateMemoryBlockRequest {
        id: m.id.clone(),
        fields: Some(chat::MemoryBlockFields {
            content: Some(content),
            ..Default::default()
        }),
        append: false,
    };
    match clients
        .memory_blocks(caller)
        .update_memory_block(request)
        .await
    {
        Ok(_) => Outcome::Saved,
        Err(s) if s.code() == tonic::Code::PermissionDenied => Outcome::ReadOnly,
        Err(s) if s.code() == tonic::Code::NotFound => Outcome::NotSaved(
            "the block no longer exists or is no longer shared with the user".into(),
        ),
        Err(s) => Outcome::NotSaved(s.message().to_owned()),
    }
}

/// The file's text: inside the workspace, not a link, at most [`MAX_READ`] bytes, UTF-8.
async fn read_back(workspace: &Path, rel: &str) -> Result<String, String> {
    let path = paths::resolve(workspace, rel)?;
    let meta = tokio::fs::symlink_metadata(&path)
        .await
        .map_err(|_| format!("{rel} was removed"))?;
    if !meta.is_file() {
        return Err(format!("{rel} is not a regular file"));
    }
    if meta.len() > MAX_READ {
        return Err(format!("{rel} is larger than {} MiB", MAX_READ >> 20));
    }
    let bytes = tokio::fs::read(&path)
        .await
        .map_err(|e| format!("cannot read {rel}: {e}"))?;
    String::from_utf8(bytes).map_err(|_| format!("{rel} is not UTF-8 text"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(mode: &str, editable: bool) -> pb::RunMemory {
        pb::RunMemory {
            id: "b1".into(),
            name: "team notes/2026".into(),
            content: "likes tea".into(),
            injection_mode: mode.into(),
            editable,
            max_content_length: 20,
            amendment: "Keep it short.".into(),
        }
    }

    #[test]
    fn file_paths_are_stable_and_stay_in_the_memory_folder() {
        assert_eq!(file_path("team notes/2026"), ".memory/team_notes_2026.md");
        assert_eq!(file_path("../../etc"), ".memory/_.._etc.md");
        assert_eq!(file_path("..."), ".memory/memory.md");
        assert_eq!(file_path("préférences"), ".memory/préférences.md");
    }

    #[test]
    fn the_prompt_says_where_the_block_is_and_whether_edits_are_kept() {
        let file = instructions(&block("agent_file", true)).unwrap();
        assert!(file.contains(".memory/team_notes_2026.md") && file.contains("saved back"));
        assert!(file.contains("at most 20") && file.ends_with("Keep it short."));
        let ro = instructions(&block("agent_file", false)).unwrap();
        assert!(ro.contains("not kept"), "{ro}");
        let tool = instructions(&block("agent_tool", true)).unwrap();
        assert!(tool.contains("`memory` tool") && tool.contains("append"));
        assert!(instructions(&block("system_prompt", true)).is_none());
    }

    #[tokio::test]
    async fn a_changed_file_over_the_limit_or_read_only_is_not_saved() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let m = block("agent_file", true);
        place(root, &m).await.unwrap();
        let path = root.join(file_path(&m.name));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "likes tea");
        assert_eq!(
            save_back(None, &caller(), root, &m).await,
            Outcome::Unchanged
        );
        std::fs::write(&path, "x".repeat(21)).unwrap();
        let out = save_back(None, &caller(), root, &m).await;
        assert!(
            matches!(&out, Outcome::NotSaved(why) if why.contains("21 characters")),
            "{out:?}"
        );
        assert!(out.notice(&m).is_some());
        let ro = block("agent_file", false);
        assert_eq!(
            save_back(None, &caller(), root, &ro).await,
            Outcome::ReadOnly
        );
        assert!(Outcome::ReadOnly.notice(&ro).is_none());
        // A link left in its place is replaced, never followed.
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", &path).unwrap();
        assert!(matches!(
            save_back(None, &caller(), root, &m).await,
            // Refused before anything is read: this link leads out of the workspace (a
            // link inside it is "not a regular file").
            Outcome::NotSaved(why) if why.contains("out of the workspace") || why.contains("not a regular file")
        ));
        place(root, &m).await.unwrap();
        assert!(
            !std::fs::symlink_metadata(&path)
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }

    fn caller() -> Caller {
        docchat_common::testing::user("alice", false)
    }
}
