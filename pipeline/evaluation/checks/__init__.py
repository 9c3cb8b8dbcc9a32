"""The correctness interface: trusted references and inputs (`reference`), what makes a check hard to
fool (`fidelity`), the compiled comparison (`fused_check`), degenerate tasks (`degeneracy`) and the
float32 numerics both sides share (`numerics`)."""
