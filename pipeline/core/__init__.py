"""The ground floor: the records every layer passes around (`records`), the run configuration (`config`),
the user's errors (`errors`), a lost piece of work (`lost_work`), where the shipped data lives
(`assets`) and the table of node roles (`node_roles`). It imports no other part of `pipeline`."""
