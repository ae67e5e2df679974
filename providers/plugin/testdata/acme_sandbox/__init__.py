"""A sandbox backend written the way the seeds' users write them, for talkops' tests."""
