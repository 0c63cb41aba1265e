"""gridbus: an HTCondor-style high-throughput computing pool whose daemons are agents on RabbitMQ."""

__version__ = "0.1.0"  # the one place the version is written (pyproject.toml reads it)
