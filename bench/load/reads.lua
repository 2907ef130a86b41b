-- Collection and document reads, alternating (wrk -s reads.lua; env DOCCHAT_KEY).
local key = os.getenv("DOCCHAT_KEY")
local paths = { "/api/v1/collections?limit=20", "/api/v1/documents?limit=20", "/api/v1/documents/count" }
local i = 0
request = function()
  i = i % #paths + 1
  return wrk.format("GET", paths[i], { ["Authorization"] = "Bearer " .. key })
end
