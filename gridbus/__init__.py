"""gridbus: an HTCondor-style high-throughput computing pool whose daemons are agents on RabbitMQ."""

__version__ = "0.1.0"
