//! Tool calling over a scripted OpenAI-compatible chat upstream: what is sent (tools,
//! tool_choice, parallel_tool_calls, assistant tool_calls and `tool` messages) and how the
//! streamed fragments are assembled by index.

use docchat_common::testing::{ScriptedCall, ScriptedHttp, ScriptedTurn};
use docchat_inference::{
    ChatError, ChatMessage, ChatModel, LocalOptions, Registry, Sampling, StreamEvent, ToolCall,
    ToolChoice, ToolSpec, Tools,
};
use serde_json::json;

fn model(server: &ScriptedHttp, tools: bool) -> ChatModel {
    let registry = Registry::parse(&format!(
        "[[models]]\nname = \"m\"\nbase_url = \"{}/v1\"\ntools = {tools}",
        server.base_url
    ))
    .unwrap();
    let entry = registry.resolve("m").unwrap();
    assert_eq!(ChatModel::calls_tools(entry), tools);
    ChatModel::from_entry(entry, &LocalOptions::default()).unwrap()
}

fn tools(choice: ToolChoice) -> Tools {
    Tools {
        tools: vec![ToolSpec {
            name: "write_file".into(),
            description: "Writes a file".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }],
        choice,
        parallel: Some(true),
    }
}

/// Streams one answer: (text, tool calls, finish reason, usage).
async fn run(
    m: &ChatModel,
    messages: &[ChatMessage],
    t: &Tools,
) -> Result<(String, Vec<ToolCall>, String, (u64, u64)), ChatError> {
    let mut stream = m.stream_tools(messages, Sampling::default(), t).await?;
    let mut text = String::new();
    while let Some(event) = stream.next().await {
        match event? {
            StreamEvent::Delta(d) => text.push_str(&d),
        }
    }
    let calls = stream.take_tool_calls()?;
    Ok((
        text,
        calls,
        stream.finish_reason().to_owned(),
        stream.usage(),
    ))
}

#[tokio::test]
async fn arguments_split_over_many_chunks_are_assembled() {
    let args = json!({"path": "out/report.txt", "content": "déjà vu — ünïcode"});
    let server = ScriptedHttp::chat_turns(vec![
        ScriptedTurn::calls(vec![ScriptedCall::new(
            "call_a",
            "write_file",
            args.clone(),
        )])
        .split(3)
        .usage(42, 7),
    ])
    .await;
    let m = model(&server, true);
    let (text, calls, finish, usage) =
        run(&m, &[ChatMessage::user("go")], &tools(ToolChoice::Auto))
            .await
            .unwrap();
    assert_eq!(text, "");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].id, "call_a");
    assert_eq!(calls[0].name, "write_file");
    let parsed: serde_json::Value = serde_json::from_str(&calls[0].arguments).unwrap();
    assert_eq!(parsed, args);
    assert_eq!(finish, "tool_calls");
    assert_eq!(usage, (42, 7));
    // What went upstream.
    let body = &server.bodies()[0];
    assert_eq!(body["stream"], true);
    assert_eq!(body["tool_choice"], "auto");
    assert_eq!(body["parallel_tool_calls"], true);
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(body["tools"][0]["function"]["name"], "write_file");
    assert_eq!(
        body["tools"][0]["function"]["parameters"]["properties"]["path"]["type"],
        "string"
    );
}

#[tokio::test]
async fn parallel_calls_keep_their_index_order_and_text_streams_before_them() {
    let mut turn = ScriptedTurn::calls(vec![
        ScriptedCall::new("c0", "read_file", json!({"path": "a.txt"})),
        ScriptedCall::new("c1", "list_files", json!({"path": "."})),
        ScriptedCall::new("c2", "read_file", json!({"path": "b.txt"})),
    ])
    .split(4);
    turn.text = "Let me look. ".into();
    let server = ScriptedHttp::chat_turns(vec![turn]).await;
    let m = model(&server, true);
    let (text, calls, _, _) = run(&m, &[ChatMessage::user("go")], &tools(ToolChoice::Required))
        .await
        .unwrap();
    let got: Vec<(&str, &str, serde_json::Value)> = calls
        .iter()
        .map(|c| {
            (
                c.id.as_str(),
                c.name.as_str(),
                serde_json::from_str(&c.arguments).unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("c0", "read_file", json!({"path": "a.txt"})),
            ("c1", "list_files", json!({"path": "."})),
            ("c2", "read_file", json!({"path": "b.txt"})),
        ]
    );
    assert_eq!(text, "Let me look. ");
    assert_eq!(server.bodies()[0]["tool_choice"], "required");
}

#[tokio::test]
async fn invalid_arguments_are_passed_through_as_written() {
    let server = ScriptedHttp::chat_turns(vec![
        ScriptedTurn::calls(vec![ScriptedCall::raw("bad", "write_file", "{\"path\": ")]).split(2),
    ])
    .await;
    let m = model(&server, true);
    let (_, calls, _, _) = run(&m, &[ChatMessage::user("go")], &tools(ToolChoice::Auto))
        .await
        .unwrap();
    assert_eq!(calls[0].arguments, "{\"path\": ");
    assert!(serde_json::from_str::<serde_json::Value>(&calls[0].arguments).is_err());
}

#[tokio::test]
async fn tool_messages_and_forced_choices_go_upstream_in_openai_form() {
    let server = ScriptedHttp::chat_turns(vec![ScriptedTurn::text("The file is written.")]).await;
    let m = model(&server, true);
    let call = ToolCall {
        id: "call_a".into(),
        name: "write_file".into(),
        arguments: "{\"path\":\"x\"}".into(),
    };
    let messages = vec![
        ChatMessage::user("write x"),
        ChatMessage::assistant_calls("", vec![call]),
        ChatMessage::tool("call_a", "ok: 3 bytes"),
    ];
    let (text, calls, finish, _) = run(&m, &messages, &tools(ToolChoice::None)).await.unwrap();
    assert_eq!(text, "The file is written.");
    assert!(calls.is_empty());
    assert_eq!(finish, "stop");
    let body = &server.bodies()[0];
    assert_eq!(body["tool_choice"], "none");
    let sent = &body["messages"];
    assert_eq!(sent[1]["role"], "assistant");
    assert_eq!(sent[1]["content"], serde_json::Value::Null);
    assert_eq!(sent[1]["tool_calls"][0]["id"], "call_a");
    assert_eq!(sent[1]["tool_calls"][0]["type"], "function");
    assert_eq!(sent[1]["tool_calls"][0]["function"]["name"], "write_file");
    assert_eq!(
        sent[1]["tool_calls"][0]["function"]["arguments"],
        "{\"path\":\"x\"}"
    );
    assert_eq!(sent[2]["role"], "tool");
    assert_eq!(sent[2]["tool_call_id"], "call_a");
    assert_eq!(sent[2]["content"], "ok: 3 bytes");

    let server = ScriptedHttp::chat_turns(vec![ScriptedTurn::text("ok")]).await;
    let m = model(&server, true);
    run(
        &m,
        &messages[..1],
        &tools(ToolChoice::Function("write_file".into())),
    )
    .await
    .unwrap();
    assert_eq!(
        server.bodies()[0]["tool_choice"],
        json!({"type": "function", "function": {"name": "write_file"}})
    );
    // Without tools, nothing about tools is sent.
    let mut s = m
        .stream_with(&messages[..1], Sampling::default())
        .await
        .unwrap();
    while s.next().await.is_some() {}
    let body = &server.bodies()[1];
    assert!(body.get("tools").is_none() && body.get("tool_choice").is_none());
}

#[tokio::test]
async fn a_call_without_a_name_is_malformed_and_a_missing_id_is_filled() {
    let server = ScriptedHttp::chat_turns(vec![ScriptedTurn::calls(vec![ScriptedCall::raw(
        "",
        "read_file",
        "{}",
    )])])
    .await;
    let m = model(&server, true);
    let (_, calls, _, _) = run(&m, &[ChatMessage::user("go")], &tools(ToolChoice::Auto))
        .await
        .unwrap();
    assert_eq!(calls[0].id, "call_0");

    let server = ScriptedHttp::chat_turns(vec![ScriptedTurn::calls(vec![ScriptedCall::raw(
        "x", "", "{}",
    )])])
    .await;
    let m = model(&server, true);
    let err = run(&m, &[ChatMessage::user("go")], &tools(ToolChoice::Auto))
        .await
        .unwrap_err();
    assert!(matches!(err, ChatError::Malformed(_)), "{err}");
}

#[tokio::test]
async fn models_without_the_flag_or_local_ones_do_not_call_tools() {
    let server = ScriptedHttp::chat_turns(vec![ScriptedTurn::text("hi")]).await;
    model(&server, false);
    let local =
        docchat_inference::LocalChat::new("tiny", "/nonexistent.gguf", LocalOptions::default());
    let m = ChatModel::Local(local);
    let err = m
        .stream_tools(
            &[ChatMessage::user("go")],
            Sampling::default(),
            &tools(ToolChoice::Auto),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ChatError::ToolsUnsupported(_)), "{err}");
}
