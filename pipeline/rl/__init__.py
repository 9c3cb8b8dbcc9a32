"""Reinforcement learning: the unified reward, returns and advantages, losses, training batches
and the DeepSpeed learner core. Plain Python; the Ray actors in actors/ wrap the learner."""
