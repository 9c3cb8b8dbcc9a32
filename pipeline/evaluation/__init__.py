"""The trusted evaluator: candidates in, `EvalResult`s out. `evaluator.Evaluator` is the whole interface;
beneath it, one package per interface: `gate` (static rules, before anything is built), `build`
(compile and artefact checks), `child` (the sandboxed child process), `checks` (correctness), `timing`
(timed rounds) and `gpu` (GPU resources). `runner` runs one candidate through them, `harness` is the
group API for trusted code outside the evaluator, `feedback` turns a result into the next message;
`light_abi` and `compute_ops` are what both sides of the sandbox read (the light format's calling
convention, the torch ops a kernelbench answer may call), so they import nothing of the evaluator."""
