"""altar: a worker fleet for container tasks. Python programs use altar.execution."""
