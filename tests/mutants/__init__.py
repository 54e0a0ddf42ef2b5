"""A bug zoo that the test suite must catch: the classic attention bugs as mutants of mtlib.

Each entry of :data:`tests.mutants.catalogue.MUTANTS` is a small, realistic edit of mtlib that
models a bug the book discusses. ``python -m tests.mutants`` applies each one to a scratch copy
of the repository, runs the unit tests that cover the mutated module there, and fails if a
mutant that is not listed as equivalent survives (or if a mutant's original snippet is no longer
in the code). See CONTRIBUTING.md, "How to add a mutant".
"""
