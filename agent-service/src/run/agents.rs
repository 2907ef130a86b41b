//! The built-in agent types (agent_type): each its own instructions and default tools.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentType {
    General,
    Task,
    DeepResearch,
    Coder,
    Search,
}

impl AgentType {
    /// Every value agent_type accepts (`auto` is `general`).
    pub const NAMES: [&'static str; 6] = [
        "auto",
        "general",
        "task",
        "deep_research",
        "coder",
        "search",
    ];

    pub const ALL: [AgentType; 5] = [
        AgentType::General,
        AgentType::Task,
        AgentType::DeepResearch,
        AgentType::Coder,
        AgentType::Search,
    ];

    pub fn parse(name: &str) -> Option<AgentType> {
        match name {
            "" | "auto" | "general" => Some(AgentType::General),
            "task" => Some(AgentType::Task),
            "deep_research" => Some(AgentType::DeepResearch),
            "coder" => Some(AgentType::Coder),
            "search" => Some(AgentType::Search),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            AgentType::General => "general",
            AgentType::Task => "task",
            AgentType::DeepResearch => "deep_research",
            AgentType::Coder => "coder",
            AgentType::Search => "search",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            AgentType::General => "General",
            AgentType::Task => "Task",
            AgentType::DeepResearch => "Deep research",
            AgentType::Coder => "Coder",
            AgentType::Search => "Search",
        }
    }

    pub fn description(self) -> &'static str {
        match self {
            AgentType::General => {
                "Answers with whatever tools help: code, files, documents, the web."
            }
            AgentType::Task => "Carries out a multi-step task and reports what it did.",
            AgentType::DeepResearch => {
                "Researches a question thoroughly across documents and the web, citing sources."
            }
            AgentType::Coder => "Writes and runs code in the session's workspace.",
            AgentType::Search => {
                "Finds and cites the passages of the session's documents that answer."
            }
        }
    }

    /// The system instructions.
    pub fn instructions(self) -> &'static str {
        match self {
            AgentType::General => {
                "You are docchat's agent. Use the tools when they help answer the user's request; when you have the answer, reply to the user directly without calling a tool. Files you write in the workspace are given to the user."
            }
            AgentType::Task => {
                "You are docchat's task agent. Break the user's task into steps, carry them out with the tools, check the results, and finish with a short report of what was done and where the results are."
            }
            AgentType::DeepResearch => {
                "You are docchat's research agent. Investigate the question thoroughly: search the documents, fetch sources, compare what they say, and answer with a well-structured report that cites where each fact comes from."
            }
            AgentType::Coder => {
                "You are docchat's coding agent. Solve the request by writing and running code in the workspace (Python or shell). Inspect outputs, fix errors, and save results as files. Finish with a summary of the result."
            }
            AgentType::Search => {
                "You are docchat's search agent. Answer from the session's documents: search them, read the relevant passages and answer citing them. Say so when the documents do not contain the answer."
            }
        }
    }

    /// Tools offered when agent_tools is `auto` and the caller has no preference.
    pub fn default_tools(self) -> &'static [&'static str] {
        match self {
            AgentType::General | AgentType::Task => &[
                "python",
                "shell",
                "read_file",
                "write_file",
                "list_files",
                "search_documents",
                "fetch_url",
            ],
            AgentType::DeepResearch => &[
                "search_documents",
                "fetch_url",
                "python",
                "read_file",
                "write_file",
                "list_files",
                "ask_model",
            ],
            AgentType::Coder => &["python", "shell", "read_file", "write_file", "list_files"],
            AgentType::Search => &["search_documents", "read_file", "list_files"],
        }
    }
}
