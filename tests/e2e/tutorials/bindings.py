"""The one place the tutorials' imports change: HTCondor's notebooks say

    import htcondor2 as htcondor
    import classad2 as classad
    from htcondor2.personal import PersonalPool

and the tests of those notebooks import these names from here instead.
"""

import gridbus.classad as classad
import gridbus.console as htcondor
from gridbus.console.personal import PersonalPool

__all__ = ["PersonalPool", "classad", "htcondor"]
