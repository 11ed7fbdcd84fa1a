"""The search room: the search strategies, a key's search as a job, where the jobs run (here or
on Dask), transfer from known keys, and a key's exact optimum."""
