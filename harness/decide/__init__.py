"""The decision stage: records in, a `Decision` out (harness.decide.decision), no HTML.

What to ship for each use case on each machine: one module per use case in `usecases/`, each declaring its objective,
its constraints, the figure it reads and its tie rule, registered in `registry`; the engines that rank
(`by_candidates`: every configuration a machine measured; `by_scenario`: one workload's scenario results;
`by_workload`: a backend comparison on one workload across machines; `deploy`: dynamic shapes, simplest
deployment); and the shared parts: `candidates` (each configuration and its figures), `picks` (a pick, an answer,
the constraints every use case applies, the tie rule on paired ratios), `nearest` (the nearest miss), `accuracy`
(what is known of a configuration's accuracy and from where), `entries` (decision.json's entries). The report
renders a Decision and decides nothing.
"""
