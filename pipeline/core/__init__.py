"""The ground floor: the records every layer passes around (`records`), the run configuration (`config`),
the user's errors (`errors`), a lost piece of work (`lost_work`) and where the shipped data lives
(`assets`). It imports no other part of `pipeline`."""
