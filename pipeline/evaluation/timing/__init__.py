"""The timing interface: a candidate's timed rounds against the baseline (`timed_rounds`) and the
statistics of a set of timings (`statistics`)."""
