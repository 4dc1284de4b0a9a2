"""The predictors study's pipeline: the training callback, the AUC, the fitted verdict and its analysis."""
