"""renderer"""
