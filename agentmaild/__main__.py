"""``python -m agentmaild``: the same entry point as the console script."""

from agentmaild.hot.entry import main

main()
