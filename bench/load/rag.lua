-- RAG completions over the scripted upstream on one session with a collection
-- (env DOCCHAT_KEY, DOCCHAT_SESSION).
local key = os.getenv("DOCCHAT_KEY")
local session = os.getenv("DOCCHAT_SESSION")
wrk.method = "POST"
wrk.path = "/api/v1/chats/" .. session .. "/completions"
wrk.headers["Authorization"] = "Bearer " .. key
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"message": "Which survey mentions the granite quarry?", "llm": "scripted", "include_chat_history": "off"}'
