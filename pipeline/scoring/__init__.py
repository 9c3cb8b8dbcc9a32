"""Scoring a policy or a directory of answers on a suite (`cudaperf bench`): the run (`bench`), its
metrics with intervals (`metrics`) and the KernelBench-style report (`kernelbench`)."""
