"""The fit: the driver (`driver.Fitter`) chooses a run kind once and runs it; each
algorithm (seeding, k-means||, relocation, annealing, balanced, the sampled fit, the
phase diagram) is a module here that owns its passes over X (`softkmeans.sources.runner`).
"""
