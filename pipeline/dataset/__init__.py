"""Building the task dataset (`cudaperf data`): checking generated tasks (`checks`), measuring their
implementations on a GPU (`measure`, with `measure_worker` in a trusted process of its own) and the
dataset card (`card`). Reading the dataset is the task layer's (`pipeline/tasks/`)."""
