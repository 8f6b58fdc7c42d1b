package io.switchml.worker;

/**
 * What an all-reduce returns: the element-wise sum over workers, or that sum divided by the world
 * size (float tensors only).
 */
public enum ReduceOp
{
    SUM, AVERAGE
}
