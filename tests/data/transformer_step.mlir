module @jit_train_step attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<300x32xf32>, %arg1: tensor<32x32xf32>, %arg2: tensor<32x32xf32>, %arg3: tensor<32x32xf32>, %arg4: tensor<32x32xf32>, %arg5: tensor<256xi32>, %arg6: tensor<256x32xf32>) -> (tensor<300x32xf32> {jax.result_info = "[0]"}, tensor<32x32xf32> {jax.result_info = "[1]"}, tensor<32x32xf32> {jax.result_info = "[2]"}, tensor<32x32xf32> {jax.result_info = "[3]"}, tensor<32x32xf32> {jax.result_info = "[4]"}, tensor<f32> {jax.result_info = "[5]"}) {
    %0 = stablehlo.reshape %arg5 : (tensor<256xi32>) -> tensor<256x1xi32>
    %1 = "stablehlo.gather"(%arg0, %0) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 32>}> : (tensor<300x32xf32>, tensor<256x1xi32>) -> tensor<256x32xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %2 = stablehlo.reduce(%1 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<256x32xf32>, tensor<f32>) -> tensor<256xf32>
    %cst_0 = stablehlo.constant dense<3.125000e-02> : tensor<f32>
    %3 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<256xf32>
    %4 = stablehlo.multiply %2, %3 : tensor<256xf32>
    %5 = stablehlo.broadcast_in_dim %4, dims = [0] : (tensor<256xf32>) -> tensor<256x32xf32>
    %6 = stablehlo.subtract %1, %5 : tensor<256x32xf32>
    %7 = stablehlo.multiply %6, %6 : tensor<256x32xf32>
    %8 = stablehlo.reduce(%7 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<256x32xf32>, tensor<f32>) -> tensor<256xf32>
    %9 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<256xf32>
    %10 = stablehlo.multiply %8, %9 : tensor<256xf32>
    %cst_1 = stablehlo.constant dense<1.000000e-05> : tensor<f32>
    %11 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<256xf32>
    %12 = stablehlo.add %10, %11 : tensor<256xf32>
    %13 = stablehlo.rsqrt %12 : tensor<256xf32>
    %14 = stablehlo.broadcast_in_dim %13, dims = [0] : (tensor<256xf32>) -> tensor<256x32xf32>
    %15 = stablehlo.multiply %6, %14 : tensor<256x32xf32>
    %16 = stablehlo.dot_general %15, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<256x32xf32>, tensor<32x32xf32>) -> tensor<256x32xf32>
    %cst_2 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %17 = stablehlo.reduce(%16 init: %cst_2) applies stablehlo.maximum across dimensions = [1] : (tensor<256x32xf32>, tensor<f32>) -> tensor<256xf32>
    %18 = stablehlo.broadcast_in_dim %17, dims = [0] : (tensor<256xf32>) -> tensor<256x32xf32>
    %19 = stablehlo.subtract %16, %18 : tensor<256x32xf32>
    %20 = stablehlo.exponential %19 : tensor<256x32xf32>
    %21 = stablehlo.reduce(%20 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<256x32xf32>, tensor<f32>) -> tensor<256xf32>
    %22 = stablehlo.broadcast_in_dim %21, dims = [0] : (tensor<256xf32>) -> tensor<256x32xf32>
    %23 = stablehlo.divide %20, %22 : tensor<256x32xf32>
    %24 = stablehlo.dot_general %23, %arg2, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<256x32xf32>, tensor<32x32xf32>) -> tensor<256x32xf32>
    %25 = stablehlo.add %1, %24 : tensor<256x32xf32>
    %26 = stablehlo.reduce(%25 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<256x32xf32>, tensor<f32>) -> tensor<256xf32>
    %27 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<256xf32>
    %28 = stablehlo.multiply %26, %27 : tensor<256xf32>
    %29 = stablehlo.broadcast_in_dim %28, dims = [0] : (tensor<256xf32>) -> tensor<256x32xf32>
    %30 = stablehlo.subtract %25, %29 : tensor<256x32xf32>
    %31 = stablehlo.multiply %30, %30 : tensor<256x32xf32>
    %32 = stablehlo.reduce(%31 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<256x32xf32>, tensor<f32>) -> tensor<256xf32>
    %33 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<256xf32>
    %34 = stablehlo.multiply %32, %33 : tensor<256xf32>
    %35 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<256xf32>
    %36 = stablehlo.add %34, %35 : tensor<256xf32>
    %37 = stablehlo.rsqrt %36 : tensor<256xf32>
    %38 = stablehlo.broadcast_in_dim %37, dims = [0] : (tensor<256xf32>) -> tensor<256x32xf32>
    %39 = stablehlo.multiply %30, %38 : tensor<256x32xf32>
    %40 = stablehlo.dot_general %39, %arg3, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<256x32xf32>, tensor<32x32xf32>) -> tensor<256x32xf32>
    %41 = stablehlo.reduce(%40 init: %cst_2) applies stablehlo.maximum across dimensions = [1] : (tensor<256x32xf32>, tensor<f32>) -> tensor<256xf32>
    %42 = stablehlo.broadcast_in_dim %41, dims = [0] : (tensor<256xf32>) -> tensor<256x32xf32>
    %43 = stablehlo.subtract %40, %42 : tensor<256x32xf32>
    %44 = stablehlo.exponential %43 : tensor<256x32xf32>
    %45 = stablehlo.reduce(%44 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<256x32xf32>, tensor<f32>) -> tensor<256xf32>
    %46 = stablehlo.broadcast_in_dim %45, dims = [0] : (tensor<256xf32>) -> tensor<256x32xf32>
    %47 = stablehlo.divide %44, %46 : tensor<256x32xf32>
    %48 = stablehlo.dot_general %47, %arg4, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<256x32xf32>, tensor<32x32xf32>) -> tensor<256x32xf32>
    %49 = stablehlo.add %25, %48 : tensor<256x32xf32>
    %50 = stablehlo.subtract %49, %arg6 : tensor<256x32xf32>
    %51 = stablehlo.multiply %50, %50 : tensor<256x32xf32>
    %52 = stablehlo.reduce(%51 init: %cst) applies stablehlo.add across dimensions = [0, 1] : (tensor<256x32xf32>, tensor<f32>) -> tensor<f32>
    %cst_3 = stablehlo.constant dense<1.953125e-03> : tensor<f32>
    %53 = stablehlo.multiply %52, %cst_3 : tensor<f32>
    %cst_4 = stablehlo.constant dense<3.906250e-03> : tensor<f32>
    %54 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<f32>) -> tensor<256x32xf32>
    %55 = stablehlo.multiply %50, %54 : tensor<256x32xf32>
    %56 = stablehlo.dot_general %47, %55, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<256x32xf32>, tensor<256x32xf32>) -> tensor<32x32xf32>
    %57 = stablehlo.dot_general %55, %arg4, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<256x32xf32>, tensor<32x32xf32>) -> tensor<256x32xf32>
    %58 = stablehlo.multiply %57, %47 : tensor<256x32xf32>
    %59 = stablehlo.reduce(%58 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<256x32xf32>, tensor<f32>) -> tensor<256xf32>
    %60 = stablehlo.broadcast_in_dim %59, dims = [0] : (tensor<256xf32>) -> tensor<256x32xf32>
    %61 = stablehlo.subtract %57, %60 : tensor<256x32xf32>
    %62 = stablehlo.multiply %47, %61 : tensor<256x32xf32>
    %63 = stablehlo.dot_general %39, %62, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<256x32xf32>, tensor<256x32xf32>) -> tensor<32x32xf32>
    %64 = stablehlo.dot_general %62, %arg3, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<256x32xf32>, tensor<32x32xf32>) -> tensor<256x32xf32>
    %65 = stablehlo.reduce(%64 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<256x32xf32>, tensor<f32>) -> tensor<256xf32>
    %66 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<256xf32>
    %67 = stablehlo.multiply %65, %66 : tensor<256xf32>
    %68 = stablehlo.broadcast_in_dim %67, dims = [0] : (tensor<256xf32>) -> tensor<256x32xf32>
    %69 = stablehlo.multiply %64, %39 : tensor<256x32xf32>
    %70 = stablehlo.reduce(%69 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<256x32xf32>, tensor<f32>) -> tensor<256xf32>
    %71 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<256xf32>
    %72 = stablehlo.multiply %70, %71 : tensor<256xf32>
    %73 = stablehlo.broadcast_in_dim %72, dims = [0] : (tensor<256xf32>) -> tensor<256x32xf32>
    %74 = stablehlo.subtract %64, %68 : tensor<256x32xf32>
    %75 = stablehlo.multiply %39, %73 : tensor<256x32xf32>
    %76 = stablehlo.subtract %74, %75 : tensor<256x32xf32>
    %77 = stablehlo.broadcast_in_dim %37, dims = [0] : (tensor<256xf32>) -> tensor<256x32xf32>
    %78 = stablehlo.multiply %76, %77 : tensor<256x32xf32>
    %79 = stablehlo.add %55, %78 : tensor<256x32xf32>
    %80 = stablehlo.dot_general %23, %79, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<256x32xf32>, tensor<256x32xf32>) -> tensor<32x32xf32>
    %81 = stablehlo.dot_general %79, %arg2, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<256x32xf32>, tensor<32x32xf32>) -> tensor<256x32xf32>
    %82 = stablehlo.multiply %81, %23 : tensor<256x32xf32>
    %83 = stablehlo.reduce(%82 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<256x32xf32>, tensor<f32>) -> tensor<256xf32>
    %84 = stablehlo.broadcast_in_dim %83, dims = [0] : (tensor<256xf32>) -> tensor<256x32xf32>
    %85 = stablehlo.subtract %81, %84 : tensor<256x32xf32>
    %86 = stablehlo.multiply %23, %85 : tensor<256x32xf32>
    %87 = stablehlo.dot_general %15, %86, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<256x32xf32>, tensor<256x32xf32>) -> tensor<32x32xf32>
    %88 = stablehlo.dot_general %86, %arg1, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<256x32xf32>, tensor<32x32xf32>) -> tensor<256x32xf32>
    %89 = stablehlo.reduce(%88 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<256x32xf32>, tensor<f32>) -> tensor<256xf32>
    %90 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<256xf32>
    %91 = stablehlo.multiply %89, %90 : tensor<256xf32>
    %92 = stablehlo.broadcast_in_dim %91, dims = [0] : (tensor<256xf32>) -> tensor<256x32xf32>
    %93 = stablehlo.multiply %88, %15 : tensor<256x32xf32>
    %94 = stablehlo.reduce(%93 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<256x32xf32>, tensor<f32>) -> tensor<256xf32>
    %95 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<256xf32>
    %96 = stablehlo.multiply %94, %95 : tensor<256xf32>
    %97 = stablehlo.broadcast_in_dim %96, dims = [0] : (tensor<256xf32>) -> tensor<256x32xf32>
    %98 = stablehlo.subtract %88, %92 : tensor<256x32xf32>
    %99 = stablehlo.multiply %15, %97 : tensor<256x32xf32>
    %100 = stablehlo.subtract %98, %99 : tensor<256x32xf32>
    %101 = stablehlo.broadcast_in_dim %13, dims = [0] : (tensor<256xf32>) -> tensor<256x32xf32>
    %102 = stablehlo.multiply %100, %101 : tensor<256x32xf32>
    %103 = stablehlo.add %79, %102 : tensor<256x32xf32>
    %104 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<300x32xf32>
    %105 = "stablehlo.scatter"(%104, %0, %103) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false}> ({
    ^bb0(%arg100: tensor<f32>, %arg101: tensor<f32>):
      %106 = stablehlo.add %arg100, %arg101 : tensor<f32>
      stablehlo.return %106 : tensor<f32>
    }) : (tensor<300x32xf32>, tensor<256x1xi32>, tensor<256x32xf32>) -> tensor<300x32xf32>
    %cst_5 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %107 = stablehlo.broadcast_in_dim %cst_5, dims = [] : (tensor<f32>) -> tensor<300x32xf32>
    %108 = stablehlo.multiply %105, %107 : tensor<300x32xf32>
    %109 = stablehlo.subtract %arg0, %108 : tensor<300x32xf32>
    %110 = stablehlo.broadcast_in_dim %cst_5, dims = [] : (tensor<f32>) -> tensor<32x32xf32>
    %111 = stablehlo.multiply %87, %110 : tensor<32x32xf32>
    %112 = stablehlo.subtract %arg1, %111 : tensor<32x32xf32>
    %113 = stablehlo.broadcast_in_dim %cst_5, dims = [] : (tensor<f32>) -> tensor<32x32xf32>
    %114 = stablehlo.multiply %80, %113 : tensor<32x32xf32>
    %115 = stablehlo.subtract %arg2, %114 : tensor<32x32xf32>
    %116 = stablehlo.broadcast_in_dim %cst_5, dims = [] : (tensor<f32>) -> tensor<32x32xf32>
    %117 = stablehlo.multiply %63, %116 : tensor<32x32xf32>
    %118 = stablehlo.subtract %arg3, %117 : tensor<32x32xf32>
    %119 = stablehlo.broadcast_in_dim %cst_5, dims = [] : (tensor<f32>) -> tensor<32x32xf32>
    %120 = stablehlo.multiply %56, %119 : tensor<32x32xf32>
    %121 = stablehlo.subtract %arg4, %120 : tensor<32x32xf32>
    return %109, %112, %115, %118, %121, %53 : tensor<300x32xf32>, tensor<32x32xf32>, tensor<32x32xf32>, tensor<32x32xf32>, tensor<32x32xf32>, tensor<f32>
  }
}
