"""The deZent paper's evaluation: a BDEW-profile district (:mod:`.district`), the three
scenarios on identical readings (:mod:`.scenarios`, parameters :mod:`.config`), their metrics
(:mod:`.metrics`) and parameter grids in parallel processes (:mod:`.experiment`)."""

from streamanon.sim.config import SimConfig
from streamanon.sim.district import District, DistrictConfig
from streamanon.sim.scenarios import SCENARIOS, SimResult, run_protocol, simulate

__all__ = ["SCENARIOS", "District", "DistrictConfig", "SimConfig", "SimResult", "run_protocol",
           "simulate"]
