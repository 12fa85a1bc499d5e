-- The example queries of docs/export.md, run by tests/test_export.cpp against an nsys-layout export
-- of its fixture runs: each must parse and return at least one row. Keep the two in step.

-- Every copy, with its direction and host memory kind (like nsys's cuda_gpu_trace report).
SELECT m.start, m.end - m.start AS duration, m.bytes,
       '[CUDA memcpy ' || o.label || ']' AS name,
       s.label AS srcKind, d.label AS dstKind, m.streamId, m.globalPid >> 24 AS pid
FROM CUPTI_ACTIVITY_KIND_MEMCPY m
JOIN ENUM_CUDA_MEMCPY_OPER o ON m.copyKind = o.id
JOIN ENUM_CUDA_MEM_KIND s ON m.srcKind = s.id
JOIN ENUM_CUDA_MEM_KIND d ON m.dstKind = d.id
ORDER BY m.globalPid, m.start;

-- Bytes and time per copy direction and run (like nsys's cuda_gpu_mem_size_sum / time_sum).
SELECT m.globalPid >> 24 AS run, o.label AS operation, COUNT(*) AS copies,
       SUM(m.bytes) AS bytes, SUM(m.end - m.start) AS total_ns
FROM CUPTI_ACTIVITY_KIND_MEMCPY m
JOIN ENUM_CUDA_MEMCPY_OPER o ON m.copyKind = o.id
GROUP BY run, o.label;

-- Compute time per kernel name (like nsys's cuda_gpu_kern_sum).
SELECT s.value AS name, COUNT(*) AS instances, SUM(k.end - k.start) AS total_ns
FROM CUPTI_ACTIVITY_KIND_KERNEL k
JOIN StringIds s ON k.shortName = s.id
GROUP BY s.value
ORDER BY total_ns DESC;

-- NVTX ranges (steps, passes, waits) with their durations (like nsys's nvtx_sum).
SELECT COALESCE(n.text, s.value) AS range, COUNT(*) AS instances, SUM(n.end - n.start) AS total_ns
FROM NVTX_EVENTS n
LEFT JOIN StringIds s ON n.textId = s.id
WHERE n.eventType = 59
GROUP BY range;

-- Copy time inside each step: which step spent what on D2H and H2D.
SELECT r.text AS step, o.label AS operation, SUM(m.end - m.start) AS copy_ns
FROM NVTX_EVENTS r
JOIN CUPTI_ACTIVITY_KIND_MEMCPY m
  ON m.globalPid = (r.globalTid >> 24) << 24 AND m.start >= r.start AND m.end <= r.end
JOIN ENUM_CUDA_MEMCPY_OPER o ON m.copyKind = o.id
WHERE r.text LIKE 'offtune:step %'
GROUP BY r.globalTid, r.text, o.label;

-- Pack decisions with their payloads.
SELECT n.start, n.text, n.int64Value AS bytes, json_extract(n.jsonText, '$.tensor') AS tensor
FROM NVTX_EVENTS n
WHERE n.eventType = 34 AND n.text LIKE 'offtune:pack%';

-- Which run is which process.
SELECT p.pid, p.name, r.status, g.name AS device
FROM PROCESSES p
JOIN OFFTUNE_RUNS r ON r.globalPid = p.globalPid
JOIN TARGET_INFO_GPU g ON g.id = r.deviceId;
