"""The use cases, one module each: the registry (harness.decide.registry) imports every module here."""
