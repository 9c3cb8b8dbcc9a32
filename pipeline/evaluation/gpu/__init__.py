"""GPU resources: the CUDA driver API (`driver`), the lock that orders timed windows and checks (`lock`),
the memory budget shared by evaluators (`memory_budget`) and torch views of raw device buffers (`device_views`)."""
