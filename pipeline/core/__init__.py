"""The ground floor: the records every layer passes around (`records`), the run configuration (`config`) with
the two tables it checks names and bounds against (`reward_terms`, `generator_backends`), the table of node roles
(`node_roles`), the user's errors (`errors`), a lost piece of work (`lost_work`) and where the shipped data lives
(`assets`). It imports no other part of `pipeline`."""
