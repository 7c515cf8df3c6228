/*
 * graph_attr.c: kernel-node launch attributes, finding a node in a clone,
 * and the device's graph-memory counters (memory-alloc nodes).
 */
#include <string.h>

#include "graph.h"

#define NATTR 16 /* sizeof CUgraphNode_st.kattrs */

static CUresult kernel_node(CUgraphNode n)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    return sim_handle_ok(n, SIM_K_NODE) && n->w.type == CU_GRAPH_NODE_TYPE_KERNEL
               ? CUDA_SUCCESS
               : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGraphKernelNodeGetAttribute(CUgraphNode hNode, CUkernelNodeAttrID attr,
                                       CUkernelNodeAttrValue *value_out)
{
    CUresult r = kernel_node(hNode);
    if (r != CUDA_SUCCESS)
        return r;
    if (!value_out || (int)attr <= 0 || (int)attr >= NATTR)
        return CUDA_ERROR_INVALID_VALUE;
    if (hNode->kattrs_set & (1u << attr))
        *value_out = hNode->kattrs[attr];
    else
        memset(value_out, 0, sizeof *value_out);
    return CUDA_SUCCESS;
}

CUresult cuGraphKernelNodeSetAttribute(CUgraphNode hNode, CUkernelNodeAttrID attr,
                                       const CUkernelNodeAttrValue *value)
{
    CUresult r = kernel_node(hNode);
    if (r != CUDA_SUCCESS)
        return r;
    if (!value || (int)attr <= 0 || (int)attr >= NATTR)
        return CUDA_ERROR_INVALID_VALUE;
    hNode->kattrs[attr] = *value;
    hNode->kattrs_set |= 1u << attr;
    return CUDA_SUCCESS;
}

CUresult cuGraphKernelNodeCopyAttributes(CUgraphNode dst, CUgraphNode src)
{
    CUresult r = kernel_node(dst);
    if (r == CUDA_SUCCESS)
        r = kernel_node(src);
    if (r != CUDA_SUCCESS)
        return r;
    memcpy(dst->kattrs, src->kattrs, sizeof dst->kattrs);
    dst->kattrs_set = src->kattrs_set;
    return CUDA_SUCCESS;
}

CUresult cuGraphNodeFindInClone(CUgraphNode *phNode, CUgraphNode hOriginalNode,
                                CUgraph hClonedGraph)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!phNode || !sim_handle_ok(hOriginalNode, SIM_K_NODE) ||
        !sim_handle_ok(hClonedGraph, SIM_K_GRAPH) ||
        hClonedGraph->origin != hOriginalNode->graph)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUgraph_st *g = hOriginalNode->graph;
    for (size_t i = 0; i < g->n && i < hClonedGraph->n; i++)
        if (g->nodes[i] == hOriginalNode) {
            *phNode = hClonedGraph->nodes[i];
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_VALUE; /* the original changed since the clone */
}

CUresult cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void *value)
{
    CUresult r = sim_check_dev(device);
    if (r != CUDA_SUCCESS)
        return r;
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    switch (attr) { /* allocated when a node is added: reserved == used */
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT:
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT:
        *(cuuint64_t *)value = __atomic_load_n(&g_sim.graph_mem[device], __ATOMIC_RELAXED);
        return CUDA_SUCCESS;
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH:
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH:
        *(cuuint64_t *)value = __atomic_load_n(&g_sim.graph_mem_high[device], __ATOMIC_RELAXED);
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult cuDeviceSetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void *value)
{
    CUresult r = sim_check_dev(device);
    if (r != CUDA_SUCCESS)
        return r;
    if (!value || (attr != CU_GRAPH_MEM_ATTR_USED_MEM_HIGH &&
                   attr != CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH) ||
        *(cuuint64_t *)value != 0)
        return CUDA_ERROR_INVALID_VALUE; /* only the high marks, only reset */
    __atomic_store_n(&g_sim.graph_mem_high[device],
                     __atomic_load_n(&g_sim.graph_mem[device], __ATOMIC_RELAXED),
                     __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGraphMemTrim(CUdevice device)
{
    return sim_check_dev(device); /* nothing cached to give back */
}
