-- Argo CD's built-in health check for pulumi.com/Stack, vendored unchanged below this
-- header as test data for ../../health_compat_test.go, which runs it the way Argo CD does.
--
-- Source: https://github.com/argoproj/argo-cd/blob/37ee0097cf851bc2dd7665fc081bbce61a7e836e/resource_customizations/pulumi.com/Stack/health.lua
-- Repository commit 37ee0097cf851bc2dd7665fc081bbce61a7e836e; the file was last changed
-- upstream by b5d698a00a2797cbadb8c6d7769b0161daea0f18 (argoproj/argo-cd#28534).
-- Copyright The Argo Authors. Licensed under the Apache License, Version 2.0:
-- https://www.apache.org/licenses/LICENSE-2.0
--
-- To refresh it, replace everything below this header with the upstream file.

local hs = {}
hs.status = "Progressing"
hs.message = "Waiting for the stack to be reconciled"

if obj.status == nil or obj.status.observedGeneration ~= obj.metadata.generation then
  hs.message = "Waiting for the operator to observe the latest spec change"
  return hs
end

if obj.status.conditions ~= nil then
  for _, condition in ipairs(obj.status.conditions) do
    if condition.type == "Stalled" and condition.status == "True" then
      hs.status = "Degraded"
      hs.message = condition.message
      return hs
    end
    if condition.type == "Reconciling" and condition.status == "True" then
      hs.status = "Progressing"
      hs.message = condition.message
      return hs
    end
    if condition.type == "Ready" and condition.status == "True" then
      hs.status = "Healthy"
      hs.message = condition.message
      return hs
    end
  end
end

return hs
