"""SQL Server: Extended Events (exported XML, or read live through pyodbc) -> statements.

* :mod:`.xevents`: the XML reader (one ``<event>`` at a time, resumable by byte offset);
* :mod:`.reading`: events -> statements (lineage, parent ids, modules, errors);
* :mod:`.live`: the live source (``sys.fn_xe_file_target_read_file``, the ring buffer) over pyodbc;
* :mod:`.command`: ``harvest sqlserver``'s options and its source for :func:`harvesters.core.run.run_harvest`.
"""
