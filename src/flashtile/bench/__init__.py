"""Benchmark harness (DESIGN.md section 6, STYLE.md "Benchmarks").

Modules, all import-safe (nothing runs, nothing compiles at import):

    flops      FLOP model and the FlashAttention-paper shapes (``paper_shapes``)
    backends   registry ``name -> factory(q, k, v, causal) -> Closures(fwd, fwd_bwd)``:
               flashtile, sdpa-cudnn, sdpa-flash, sdpa-efficient, flex
    harness    warm-up + ``do_bench`` medians, matmul ceiling, ``run_benchmark``
    report     long-format CSV and the human table
    plots      TFLOPS-vs-seqlen figure (matplotlib)
    cli        ``flashtile bench`` options (``configure_parser``) and ``run``
"""
