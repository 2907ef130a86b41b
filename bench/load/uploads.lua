-- Uploads of a 20 KB text file (multipart, part `file`; env DOCCHAT_KEY).
local key = os.getenv("DOCCHAT_KEY")
local boundary = "docchatloadboundary7f3a"
local text = string.rep("Granite quarries and copper beacons along the harbour. ", 360)
wrk.method = "PUT"
wrk.path = "/api/v1/uploads"
wrk.headers["Authorization"] = "Bearer " .. key
wrk.headers["Content-Type"] = "multipart/form-data; boundary=" .. boundary
wrk.body = "--" .. boundary .. "\r\n"
  .. 'Content-Disposition: form-data; name="file"; filename="load.txt"\r\n'
  .. "Content-Type: text/plain\r\n\r\n" .. text .. "\r\n--" .. boundary .. "--\r\n"
