"""``python -m agentmaild``: the same entry point as the console script."""

from agentmaild.entry import main

main()
