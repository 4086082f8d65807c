"""InquireBench as HF datasets (build, cache, splits) and the InquireMobile release formats."""
