-- Argo CD health check for RateLimitConfig (ratelimit.envoyproxy.io/v1alpha1), from its kstatus
-- conditions: Healthy when Ready=True for the current generation; Degraded when Stalled=True (the
-- resource is rejected, or a pod NACKs it; a rejected edit keeps the last accepted generation served,
-- and the message says which); Progressing otherwise (not yet seen by the operator, or pods still
-- to ACK). Lua 5.1 (Argo CD's gopher-lua); docs/operator.md says how to install it.
local hs = { status = "Progressing", message = "waiting for the ratelimit operator" }
if obj.status == nil or obj.status.conditions == nil then
  return hs
end
local generation = obj.metadata.generation
local conditions = {}
for _, c in ipairs(obj.status.conditions) do
  conditions[c.type] = c
end
-- A condition counts only when it was set for the current generation.
local function current(c)
  return c ~= nil and (generation == nil or c.observedGeneration == nil or c.observedGeneration == generation)
end
local function say(c)
  return (c.reason or "") .. ": " .. (c.message or "")
end
local stalled = conditions["Stalled"]
if current(stalled) and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = say(stalled)
  return hs
end
local ready = conditions["Ready"]
if current(ready) then
  if ready.status == "True" then
    hs.status = "Healthy"
  end
  hs.message = say(ready)
end
return hs
