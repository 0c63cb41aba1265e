"""The agent framework: daemons as QMF-style agents on RabbitMQ (asyncio, aio-pika)."""

from gridbus.agent.client import AsyncClient
from gridbus.agent.core import Agent
from gridbus.agent.objects import Call, ManagedObject, method
from gridbus.status import MethodError, Status

__all__ = ["Agent", "AsyncClient", "Call", "ManagedObject", "MethodError", "Status", "method"]
