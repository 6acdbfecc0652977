"""What every harvester shares: statements and task runs, state, the background reader, the run sequence.

A source (:mod:`harvesters.sqlserver`, :mod:`harvesters.snowflake`) turns its log into
:class:`~harvesters.core.tasks.Statement` s; :class:`~harvesters.core.tasks.TaskGrouper` groups them into task
runs and hands records to the emitter; :func:`~harvesters.core.run.run_harvest` is the one sequence every source
plugs into (validate, lock, emitter, resume, harvest, save state, summary).
"""
