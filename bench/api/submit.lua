-- wrk script: POSTs task submissions to /api/v1/tasks (or /api/v1/tasks/batch).
--   wrk ... -s bench/api/submit.lua http://HOST:PORT -- [BATCH [CPU_MILLI [GPU_MILLI]]]
-- BATCH 0 (default): one task per POST /api/v1/tasks.
-- BATCH N (1..1000): POST /api/v1/tasks/batch with N tasks per request.
-- GPU_MILLI 0 (default): no GPU; otherwise one GPU share of that many milli.
-- The bearer token comes from the environment (HF_TOKEN). The body is built
-- once: every request submits the same task(s) (names need not be unique).

local function task_json(name, cpu, gpu_milli)
  local req = string.format('"cpu_milli":%d,"memory_mib":128', cpu)
  if gpu_milli > 0 then
    req = req .. string.format(',"gpu":1,"gpu_milli":%d', gpu_milli)
  end
  return string.format('{"name":"%s","group":"bench","priority":0,"requests":{%s}}', name, req)
end

function init(args)
  local batch = tonumber(args[1] or "0")
  local cpu = tonumber(args[2] or "100")
  local gpu_milli = tonumber(args[3] or "0")
  local token = os.getenv("HF_TOKEN")
  if not token or token == "" then
    error("submit.lua: HF_TOKEN is not set")
  end
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Authorization"] = "Bearer " .. token
  if batch > 0 then
    local parts = {}
    for i = 1, batch do
      parts[i] = task_json("bench-batch-" .. i, cpu, gpu_milli)
    end
    wrk.path = "/api/v1/tasks/batch"
    wrk.body = '{"tasks":[' .. table.concat(parts, ",") .. ']}'
  else
    wrk.path = "/api/v1/tasks"
    wrk.body = task_json("bench-task", cpu, gpu_milli)
  end
end
