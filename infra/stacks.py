"""The deployment's two stacks, composed of the constructs in this package
and nothing else:

- data     what must outlive an upgrade: the tables, the checkpoint bucket,
           the queues. Nothing in it refers to the service stack.
- service  what can be replaced at will: network, GPU pools, functions,
           event wiring, API, alerts, dashboard and alarms. It reads the
           data stack's resources (one-way references, so no cycles).
"""

from __future__ import annotations

import aws_cdk as cdk
from constructs import Construct

from gqa.models.deployment import Deployment

from .alerts import Alerts
from .api import Api
from .checkpoints import Checkpoints
from .compute import GpuPools
from .events import EventWiring
from .functions import Functions
from .network import Network
from .notices import Notices
from .observability import Observability
from .outputs import outputs
from .queues import Queues
from .registration import SettingsRegistration
from .tables import Tables

DESCRIPTION = "gqa, a virtual queue for GPU training jobs"


class DataStack(cdk.Stack):
    def __init__(self, scope: Construct, id: str, *, config: Deployment, indexes_through: str | None = None,
                 **kwargs) -> None:
        super().__init__(scope, id, description=f"{DESCRIPTION}: tables, checkpoints and queues ({config.name})",
                         termination_protection=config.retain_data, **kwargs)
        self.config = config
        self.tables = Tables(self, "Tables", config=config, indexes_through=indexes_through)
        self.checkpoints = Checkpoints(self, "Checkpoints", config=config)
        self.queues = Queues(self, "Queues", config=config)


class ServiceStack(cdk.Stack):
    def __init__(self, scope: Construct, id: str, *, config: Deployment, data: DataStack, **kwargs) -> None:
        super().__init__(scope, id, description=f"{DESCRIPTION}: GPU pools, functions and API ({config.name})",
                         **kwargs)
        self.config = config
        self.network = Network(self, "Network", config=config)
        self.pools = GpuPools(self, "GpuPools", config=config, network=self.network, checkpoints=data.checkpoints)
        self.alerts = Alerts(self, "Alerts", config=config)
        self.notices = Notices(self, "Notices", config=config, key=self.alerts.key)
        self.functions = Functions(self, "Functions", config=config, tables=data.tables, queues=data.queues,
                                   checkpoints=data.checkpoints, batch=self.pools, alerts_topic=self.alerts.topic,
                                   notices_topic=self.notices.topic)
        self.events = EventWiring(self, "Events", config=config, queues=data.queues, functions=self.functions,
                                  batch=self.pools)
        self.settings = SettingsRegistration(self, "Settings", config=config, tables=data.tables)
        self.api = Api(self, "Api", config=config, function=self.functions.api, checkpoints=data.checkpoints)
        self.observability = Observability(
            self, "Observability", config=config, queues=data.queues, functions=self.functions.by_name,
            dead_letters=[*data.queues.dead_letters.values(), *self.events.dead_letters.values()],
            topic=self.alerts.topic)
        outputs(self, self.api)


def stack_names(config: Deployment) -> tuple[str, str]:
    return f"gqa-{config.name}-data", f"gqa-{config.name}-service"


def build_stacks(app: cdk.App, config: Deployment, *,
                 indexes_through: str | None = None) -> tuple[DataStack, ServiceStack]:
    data_name, service_name = stack_names(config)
    data = DataStack(app, data_name, config=config, indexes_through=indexes_through)
    service = ServiceStack(app, service_name, config=config, data=data)
    for stack in (data, service):
        cdk.Tags.of(stack).add("gqa:deployment", config.name)
    return data, service
