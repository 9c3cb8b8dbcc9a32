"""The correctness interface: a group's trusted data (`group_data`) and where its buffers lie
(`buffer_layout`), the references that fill it (`reference_c` with `input_draws`, `reference_torch`),
whether outputs match (`comparison`), a group's device memory estimate (`footprint`), what makes a check
hard to fool (`fidelity`), the compiled comparison (`fused_check`), degenerate tasks (`degeneracy`) and
the float32 numerics both sides share (`numerics`)."""
