"""The child process interface: one candidate runs in a sandboxed child on buffers the evaluator owns.
`sandbox` starts it (bubblewrap, `landlock`, `seccomp`), `main` is the program inside, `torch_guard`
its runtime checks, `warm` children started ahead, `outcome` how a child's replies are read."""
