"""`txcl test`: rule tests.

Modules, in the order a session uses them: `spec` (finding and reading test files, TX4xx),
`standins` (mocked targets, simulated workers, the virtual clock), `runner` (one case on the
real interpreter and continuation machinery), `compare` (expected against produced),
`fixtures` (each op's mock-request/mock-response pair as a case), `session` (a whole run),
`coverage`, `report` (full, concise, json, junit) and `update` (`--update`).
"""
